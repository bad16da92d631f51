"""app.crawl_gc: the collector's settings during a crawl, and put back afterwards."""

from __future__ import annotations

import gc

import pytest

from courtier.crawl.app import GC_THRESHOLDS, crawl_gc


def test_crawl_gc_sets_the_thresholds_freezes_start_up_and_restores() -> None:
    before = gc.get_threshold()
    frozen_before = gc.get_freeze_count()
    with crawl_gc():
        assert gc.get_threshold() == GC_THRESHOLDS
        assert gc.get_freeze_count() >= frozen_before
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_crawl_gc_restores_after_an_error() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), crawl_gc():
        raise RuntimeError("crawl failed")
    assert gc.get_threshold() == before


def test_cycles_made_during_the_crawl_are_still_collected() -> None:
    class Node:
        other: object = None

    with crawl_gc():
        a, b = Node(), Node()
        a.other, b.other = b, a
        probe = [a]
        del a, b
        probe.clear()
        assert gc.collect() >= 2  # the cycle was garbage and the collector found it
