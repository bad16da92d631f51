-- courtier SQLite schema: one politeness clock per server. The shard and the first 4
-- bytes of every url_key are now the digest of the host name alone (core/urls.py), not of
-- scheme://authority, so every scheme and port of one name has one owner. Every stored
-- url_key and shard is rewritten: a rewrite of every URL row and its index entries (its
-- cost: docs/scale-out.md "Server keys"). The last 12 bytes of a key (the URL's digest) are
-- kept, so the old key of a row names its new one; the events (their column and the
-- url_key in their payload), the fetch log and near_dup_of (a key's first 8 bytes) follow
-- the URL rows by that map. Saved host clocks were per host key and are dropped (the next
-- owner waits one delay per server, as after a crash); shard leases are dropped (epochs
-- kept), so every shard is acquired afresh with a higher epoch, as in migration 6.
CREATE TEMP TABLE server_rekey (
    old_key BLOB NOT NULL PRIMARY KEY,
    new_key BLOB NOT NULL
) WITHOUT ROWID;
INSERT INTO server_rekey (old_key, new_key)
    SELECT url_key, courtier_server_url_key(host_key, url_key) FROM urls;
DELETE FROM server_rekey WHERE old_key = new_key;
UPDATE urls SET url_key = courtier_server_url_key(host_key, url_key),
                shard = courtier_shard_of_host(host_key);
UPDATE events SET url_key = r.new_key,
                  payload = replace(payload, lower(hex(r.old_key)), lower(hex(r.new_key)))
    FROM server_rekey AS r WHERE events.url_key = r.old_key;
UPDATE fetch_log SET url_key = r.new_key
    FROM server_rekey AS r WHERE fetch_log.url_key = r.old_key;
CREATE TEMP TABLE server_prefix (old_head TEXT NOT NULL PRIMARY KEY, new_head TEXT NOT NULL)
    WITHOUT ROWID;
INSERT OR IGNORE INTO server_prefix (old_head, new_head)
    SELECT lower(hex(substr(old_key, 1, 8))), lower(hex(substr(new_key, 1, 8)))
    FROM server_rekey;
UPDATE urls SET near_dup_of = p.new_head
    FROM server_prefix AS p WHERE urls.near_dup_of = p.old_head;
DROP TABLE server_prefix;
DROP TABLE server_rekey;
UPDATE hosts SET shard = courtier_shard_of_host(host_key);
UPDATE host_queue SET shard = courtier_shard_of_host(host_key);
UPDATE host_levels SET shard = courtier_shard_of_host(host_key);
UPDATE trap_stats SET shard = courtier_shard_of_host(host_key);
DELETE FROM host_clocks;
UPDATE shards SET owner = NULL, lease_expires_at = 0;
