"""The core: URLs, records, clock, errors, configuration and logging. It imports nothing
of courtier outside this package."""
