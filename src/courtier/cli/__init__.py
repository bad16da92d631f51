"""The command line: the crawl commands, the operator's query, admin and ops commands."""
