"""The one place that turns ``--store`` / ``COURTIER_STORE`` into a Store.

* nothing (None or empty): the embedded SQLite store, ``<data>/courtier.db``;
* ``postgresql://user[:password]@host[:port]/database`` (or ``postgres://``):
  the shared PostgreSQL store (schema created or migrated on first use).

Anything else is a :class:`ConfigError` naming ``--store``. With PostgreSQL,
``--data`` still holds this process's WARC spool and lock. Failing to reach or
log in to the server at start is a configuration error too (exit 2): the message
names ``--store`` and the server, never the password.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from courtier.core.clock import Clock
from courtier.core.errors import ConfigError, StoreError
from courtier.store.base import Store
from courtier.store.postgres.dsn import POSTGRES_SCHEMES, describe_dsn, is_postgres_url

ENV_NAME = "COURTIER_STORE"
STORE_HELP = ("the crawl's store: postgresql://user@host:port/database (or COURTIER_STORE); "
              "unset: SQLite under --data")


def store_url(flag: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The store URL in force: the flag, else ``COURTIER_STORE``, else None (SQLite)."""
    env = os.environ if environ is None else environ
    value = flag if flag else env.get(ENV_NAME)
    if not value or not value.strip():
        return None
    value = value.strip()
    check_store_url(value)
    return value


def check_store_url(value: str) -> None:
    """ConfigError unless ``value`` is a URL of a store courtier knows."""
    try:
        scheme = urlsplit(value).scheme.lower()
    except ValueError as exc:
        raise ConfigError(f"--store {value!r}: not a URL ({exc})") from None
    if scheme not in POSTGRES_SCHEMES:
        known = " or ".join(f"{s}://" for s in POSTGRES_SCHEMES)
        shown = f"scheme {scheme!r}" if scheme else "no scheme"
        raise ConfigError(
            f"--store: unknown store URL ({shown}); use {known}user@host:port/database, "
            "or leave --store unset for SQLite under --data")


def make_data_dir(data_dir: Path) -> None:
    """Create ``--data`` (and its parents) if needed; one-line ConfigError naming
    ``--data`` when it is a file, cannot be created or cannot be written to."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"--data {data_dir}: is a file, not a folder; name a folder "
                          "(it is created if missing)") from None
    except NotADirectoryError:
        raise ConfigError(f"--data {data_dir}: cannot create the folder: a part of the path "
                          "is a file") from None
    except OSError as exc:
        raise ConfigError(f"--data {data_dir}: cannot create the folder: "
                          f"{exc.strerror or exc}") from None
    if not os.access(data_dir, os.W_OK | os.X_OK):
        raise ConfigError(f"--data {data_dir}: the folder is not writable")


def data_dir_in_use(data_dir: Path) -> bool:
    """True when a crawl process holds ``DATA/courtier.lock`` (``crawl.app.data_dir_lock``):
    probed with a non-blocking lock taken and dropped at once; a missing lock file is no
    crawl."""
    import fcntl

    try:
        handle = (data_dir / "courtier.lock").open("r")
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def is_shared(url: str | None) -> bool:
    """True when the store is a server (PostgreSQL), not the file under --data."""
    return url is not None and is_postgres_url(url)


def make_store(url: str | None, data_dir: Path, clock: Clock | None = None,
               durability: str = "normal", stalled_transaction_timeout: float | None = None
               ) -> Store:
    """A new, unopened store for ``url`` (see the module docstring). ``durability``
    (--durability) applies to SQLite; PostgreSQL commits are synchronous.
    ``stalled_transaction_timeout``: PostgreSQL ends a transaction whose client stopped
    for this long (store/postgres/store.py; default there)."""
    if url is None:
        from courtier.store.sqlite import SqliteStore

        return SqliteStore(data_dir / "courtier.db", clock=clock, durability=durability)
    check_store_url(url)
    from courtier.store.postgres import PostgresStore

    if stalled_transaction_timeout is None:
        return PostgresStore(url, clock=clock)
    return PostgresStore(url, clock=clock,
                         stalled_transaction_timeout=stalled_transaction_timeout)


async def open_store(url: str | None, data_dir: Path, clock: Clock | None = None,
                     *, must_exist: bool = False, durability: str = "normal",
                     stalled_transaction_timeout: float | None = None) -> Store:
    """Make and open the store. ``must_exist``: a missing SQLite database is a ConfigError
    (read-only commands must not create an empty crawl); otherwise a missing ``--data``
    folder is created (:func:`make_data_dir`), so configuration commands (``seed add``,
    ``policy set``) can prepare a crawl before it runs. Unreachable or refused PostgreSQL
    servers raise ConfigError naming ``--store``."""
    if url is None and must_exist:
        db = data_dir / "courtier.db"
        if not db.exists():
            raise ConfigError(f"--data {data_dir}: no crawl database here ({db} does not exist)")
    elif url is None:
        make_data_dir(data_dir)
    store = make_store(url, data_dir, clock, durability, stalled_transaction_timeout)
    if url is None:
        await store.open()
        return store
    try:
        await store.open()
    except StoreError as exc:
        reason = str(exc).split(" failed: ", 1)[-1]
        raise ConfigError(f"--store {describe_dsn(url)}: cannot open the store: {reason}") from None
    return store
