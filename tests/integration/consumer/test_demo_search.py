"""``courtier demo`` ends with the feed end to end: its crawl indexed, one search run, the
hits printed with the command to try next.

Checked by breaking it: without the index step the demo prints no search and no hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from courtier.cli.main import main


@pytest.mark.timeout(180)
def test_the_demo_ends_with_a_search_over_its_crawl(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "demo"
    assert main(["demo", "--data", str(data), "--hosts", "2", "--pages", "3", "--delay",
                 "0.05", "--progress", "none"]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index(f"$ courtier search about --data {data}   (4 pages match)")
    hits = [line.strip().split("  ", 1) for line in out[at + 1:at + 5]]
    assert sorted(url.split("/", 3)[3] for url, _ in hits) == [
        "about.html", "about.html", "mirror/about.html", "mirror/about.html"]
    assert all(title.endswith(" about") for _, title in hits)
    assert out[at + 5] == (f"try: courtier search polite crawler --data {data}  "
                           "(README: 'Feed a search index')")
    assert (data / "search.db").is_file()
    # the command it suggests answers as printed
    assert main(["search", "about", "--data", str(data)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4
