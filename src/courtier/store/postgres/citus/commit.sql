-- courtier on Citus: the commit (courtier_commit, migration 15's body) with custom plans.
-- Migration 16 gave it generic plans; Citus cannot build a distributed plan of a
-- statement whose values are parameters of a generic plan ("could not create
-- distributed plan"). Its statements then run as Citus plans them: the batch (an array)
-- joined to urls becomes an intermediate result on the coordinator, the UPDATE and the
-- inserts that read its RETURNING rows are run per Citus shard.
ALTER FUNCTION courtier_commit(courtier_commit[], courtier_new_url[], courtier_host_delta[],
                               double precision)
    SET plan_cache_mode = force_custom_plan;
