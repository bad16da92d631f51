"""``data_dir_in_use``: whether a crawl process holds an embedded crawl's --data, which
``courtier stats --data`` reports as ``running`` (issue #36). Red with the probe always
answering False."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from courtier.cli.main import main
from courtier.crawl.app import data_dir_lock
from courtier.store.open import data_dir_in_use


def test_a_held_data_folder_is_in_use_and_a_free_one_is_not(tmp_path: Path) -> None:
    assert not data_dir_in_use(tmp_path / "missing")
    with data_dir_lock(tmp_path):
        assert data_dir_in_use(tmp_path)
    assert not data_dir_in_use(tmp_path)


def test_stats_of_an_embedded_crawl_says_running_while_its_folder_is_held(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "crawl"
    assert main(["seed", "add", "http://a.test/", "--data", str(data)]) == 0
    capsys.readouterr()
    with data_dir_lock(data):
        assert main(["stats", "--data", str(data)]) == 0
        held = json.loads(capsys.readouterr().out)
    assert main(["stats", "--data", str(data)]) == 0
    free = json.loads(capsys.readouterr().out)
    assert held["running"] is True and free["running"] is False
