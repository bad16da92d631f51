"""A registered consumer name is of one kind: a crawl-wide position (``register_consumer``)
or a per-shard cursor (``register_shard_consumer``); using a name as the other kind is a
usage error, never a silent second registration (the retention would then hold the
outbox for a consumer that no longer reads that way)."""

from __future__ import annotations

from courtier.core.errors import ConfigError

__all__ = ["refuse_other_kind"]


def refuse_other_kind(name: str, registered_as_other: bool, by_shard: bool) -> None:
    """Raise :class:`ConfigError` when ``name`` is registered as the other kind."""
    if registered_as_other:
        kind, other = ("per-shard", "crawl-wide") if by_shard else ("crawl-wide", "per-shard")
        raise ConfigError(
            f"consumer {name!r} is registered with a {other} position, not as a {kind} one;"
            f" forget it first (courtier events --forget-consumer NAME) to register it again")
