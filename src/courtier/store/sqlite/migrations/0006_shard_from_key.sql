-- Shards are now the leading bits of the host digest, i.e. of every url_key
-- (urls.shard_of / shard_of_key), so a key names its partition by itself.
-- Re-derive the shard of every row; leases are dropped (epochs kept), so the
-- next owner re-acquires every shard with a higher epoch.
UPDATE urls SET shard = courtier_shard_of_host(host_key);
UPDATE hosts SET shard = courtier_shard_of_host(host_key);
UPDATE shards SET owner = NULL, lease_expires_at = 0;
