-- courtier PostgreSQL schema, migration 22: an http host that redirects its URLs to
-- https. hosts.https_upgrade is the https host key (https://h, or https://h:PORT) an
-- http host's URLs go to once one of them answered a permanent redirect to its very same
-- URL on https; NULL: fetched as http. Kept with the host's other politeness state, so a
-- restart or the shard's next owner settles its http URLs without a request too
-- (crawl/https_upgrade.py, docs/fetch.md). A nullable column without a default: no
-- table rewrite.
ALTER TABLE hosts ADD COLUMN https_upgrade text;
