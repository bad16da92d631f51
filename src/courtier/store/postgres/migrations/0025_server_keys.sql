-- courtier PostgreSQL schema: one politeness clock per server. The shard and the first 4
-- bytes of every url_key are now the digest of the host name alone (core/urls.py), not of
-- scheme://authority, so every scheme and port of one name has one owner. Every stored
-- url_key and shard is rewritten: a rewrite of every URL row (most change partition) and
-- its index entries (its cost: docs/scale-out.md "Server keys"). The new keys and shards
-- are computed in Python (xxh3) by the step named below, which fills server_rekey and
-- server_host_shards in this transaction (store/postgres/_server_rekey.py). Saved host
-- clocks were per host key and are dropped (the next owner waits one delay per server, as
-- after a crash); shard leases are dropped (epochs kept), so every shard is acquired
-- afresh with a higher epoch. The events (their columns and the url_key in their
-- payload), the fetch log and near_dup_of (a key's first 8 bytes) follow the URL rows.
-- courtier:python server_rekey
UPDATE urls AS u SET shard = r.new_shard, url_key = r.new_key
    FROM server_rekey AS r WHERE u.shard = r.old_shard AND u.url_key = r.old_key;
UPDATE events AS e SET shard = r.new_shard, url_key = r.new_key,
    payload = replace(e.payload, encode(r.old_key, 'hex'), encode(r.new_key, 'hex'))
    FROM server_rekey AS r WHERE e.shard = r.old_shard AND e.url_key = r.old_key;
UPDATE fetch_log AS f SET shard = r.new_shard, url_key = r.new_key
    FROM server_rekey AS r WHERE f.shard = r.old_shard AND f.url_key = r.old_key;
CREATE TEMP TABLE server_prefix ON COMMIT DROP AS
    SELECT DISTINCT ON (old_head) encode(substr(old_key, 1, 8), 'hex') AS old_head,
           encode(substr(new_key, 1, 8), 'hex') AS new_head
    FROM server_rekey ORDER BY old_head;
CREATE INDEX ON server_prefix (old_head);
UPDATE urls AS u SET near_dup_of = p.new_head
    FROM server_prefix AS p WHERE u.near_dup_of = p.old_head;
UPDATE hosts AS t SET shard = s.new_shard
    FROM server_host_shards AS s WHERE t.host_key = s.host_key AND t.shard <> s.new_shard;
UPDATE host_queue AS t SET shard = s.new_shard
    FROM server_host_shards AS s WHERE t.host_key = s.host_key AND t.shard <> s.new_shard;
UPDATE host_levels AS t SET shard = s.new_shard
    FROM server_host_shards AS s WHERE t.host_key = s.host_key AND t.shard <> s.new_shard;
UPDATE trap_stats AS t SET shard = s.new_shard
    FROM server_host_shards AS s WHERE t.host_key = s.host_key AND t.shard <> s.new_shard;
DELETE FROM host_clocks;
UPDATE shards SET owner = NULL, lease_expires_at = 0;
