"""Values and tiers from the command line, in-process over a SQLite crawl: ``seed add
--value``, ``url import-values``, ``policy set --tier/--min-interval``, ``stats``."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest

from courtier.cli.admin import run_admin
from courtier.cli.main import build_parser
from courtier.cli.query import run_query
from courtier.core.errors import ConfigError
from courtier.core.urls import canonicalize
from courtier.store.sqlite import SqliteStore


def _run(runner: Any, *argv: str) -> tuple[int, Any]:
    out = io.StringIO()
    code = runner(build_parser().parse_args(list(argv)), out)
    return code, json.loads(out.getvalue())


async def _stored(data: Path, urls: list[str]) -> tuple[dict[bytes, float], dict[str, Any]]:
    store = SqliteStore(data / "courtier.db")
    await store.open()
    try:
        keys = [canonicalize(u).url_key for u in urls]
        values = await store.url_values(keys)
        tiers = await store.host_tiers(["http://a.test", "https://a.test"])
        return values, {k: v.tier for k, v in tiers.items()}
    finally:
        await store.close()


def test_values_and_host_tiers_from_the_cli(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    asyncio.run(SqliteStore(data / "courtier.db").open())
    code, answer = _run(run_query, "seed", "add", "--json", "http://a.test/", "http://a.test/b",
                        "--value", "7.5", "--data", str(data))
    assert code == 0 and answer["accepted"] == 2, answer
    values_file = tmp_path / "values.tsv"
    values_file.write_text("# from the search engine\nhttp://a.test/b\t3.25\n\n"
                           "http://a.test/nowhere\t1\n", encoding="utf-8")
    code, imported = _run(run_query, "url", "import-values", str(values_file),
                          "--data", str(data))
    assert code == 0 and imported == {"lines": 2, "updated": 1, "unknown": 1}
    values, _ = asyncio.run(_stored(data, ["http://a.test/", "http://a.test/b"]))
    assert values == {canonicalize("http://a.test/").url_key: 7.5,
                      canonicalize("http://a.test/b").url_key: 3.25}

    code, _ = _run(run_admin, "policy", "set", "a.test", "--delay", "3", "--data",
                        str(data))
    assert code == 0
    code, fresh = _run(run_admin, "policy", "set", "a.test", "--tier", "hot",
                       "--data", str(data))
    assert code == 1 and "unknown tier" in fresh["freshness"]["error"]  # no such tier here
    code, fresh = _run(run_admin, "policy", "set", "a.test", "--min-interval", "300",
                       "--max-interval", "3600", "--data", str(data))
    assert code == 0 and fresh["freshness"]["min_interval"] == 300.0
    code, shown = _run(run_admin, "policy", "get", "a.test", "--data", str(data))
    assert shown["policy"]["delay"] == 3.0  # the freshness override kept the politeness one
    assert shown["freshness"]["max_interval"] == 3600.0
    code, stats = _run(run_query, "stats", "--data", str(data))
    assert code == 0 and stats["refresh"]["tiers"]["unplanned"]["due_24h"] == 2
    code, cleared = _run(run_admin, "policy", "clear", "a.test", "--data", str(data))
    assert code == 0 and cleared["freshness"]["override"] is False


def test_a_bad_values_file_imports_nothing_and_names_every_bad_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    asyncio.run(SqliteStore(data / "courtier.db").open())
    _run(run_query, "seed", "add", "--json", "http://a.test/", "--data", str(data))
    bad = tmp_path / "bad.tsv"
    bad.write_text("http://a.test/\t2\nno tab here\nhttp://a.test/\tlots\n"
                   "http://a.test/\t-1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        _run(run_query, "url", "import-values", str(bad), "--data", str(data))
    text = str(caught.value)
    assert "3 bad line(s), nothing imported" in text
    assert "bad.tsv:2" in text and "bad.tsv:3" in text and "bad.tsv:4" in text
    values, _ = asyncio.run(_stored(data, ["http://a.test/"]))
    assert values == {}
