"""The crawl process and its parts: the worker's loop (:mod:`.worker`) wired from parts
that each own their state (fetcher, in-flight fetches, committer, refiller, releaser,
shard keeper, day limits, pacer). Importing this package loads nothing heavy; import
the modules themselves."""
