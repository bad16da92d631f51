-- courtier SQLite schema, migration 3: when a host's policy override last changed
-- (running crawls poll it to apply overrides within a second).
ALTER TABLE hosts ADD COLUMN policy_updated_at REAL;
CREATE INDEX hosts_policy_updated ON hosts (policy_updated_at) WHERE policy_updated_at IS NOT NULL;
