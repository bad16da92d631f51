-- courtier PostgreSQL schema, migration 26: why a host's robots.txt is unreachable.
-- hosts.robots_error_kind is the last failure's class (a FetchError kind such as
-- tls_unknown_issuer, dns, refused, or http_503), robots_error its message (for a TLS
-- failure: what was wrong with the certificate, and --ca-file for an unknown issuer),
-- robots_error_since when this run of failures began, robots_error_at the last one.
-- All NULL once robots.txt answers again (2xx or 4xx). Written with the other robots
-- fields, so `courtier url` and `courtier domain stats` name the reason from the store at
-- once, before the host's URLs are given up (docs/fetch.md "Failure kinds"). Nullable
-- columns without a default: no table rewrite.
ALTER TABLE hosts ADD COLUMN robots_error_kind text;
ALTER TABLE hosts ADD COLUMN robots_error text;
ALTER TABLE hosts ADD COLUMN robots_error_since double precision;
ALTER TABLE hosts ADD COLUMN robots_error_at double precision;
