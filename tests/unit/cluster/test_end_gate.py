"""The end gate of ``crawl --workers N`` (cluster/end_gate.py): the parent's keeper opens
it once every child's last word is that the crawl is over, or the child has ended; a
worker's :class:`CrawlEnd` says each change of its verdict once and may leave only once
the gate is open.

Seen red on a scratch edit (restored since): ``EndKeeper.said`` ignoring a child's
"busy" (the gate opened on a word taken back), ``EndKeeper.ended`` not counting a child
that died as ended, and ``CrawlEnd.may_leave`` not asking the gate.
"""

from __future__ import annotations

import threading

from courtier.cluster.end_gate import CrawlEnd, EndKeeper, SiblingEndGate


def keeper(*names: str) -> tuple[EndKeeper, threading.Event]:
    opened = threading.Event()
    return EndKeeper(names, opened), opened


ALL_ALIVE = {"worker-0": True, "worker-1": True, "worker-2": True}


def test_the_gate_opens_when_every_child_last_said_the_crawl_is_over() -> None:
    gate, opened = keeper("worker-0", "worker-1", "worker-2")
    gate.said("worker-0", over=True)
    gate.said("worker-1", over=True)
    gate.said("worker-1", over=False)  # it found work again: its word is taken back
    gate.said("worker-2", over=True)
    gate.ended(ALL_ALIVE)
    assert not opened.is_set() and gate.waiting == ["worker-1"]
    gate.said("worker-1", over=True)
    assert opened.is_set() and gate.waiting == []


def test_a_child_that_ended_while_still_crawling_is_not_waited_for() -> None:
    """Killed mid-crawl, it never says the crawl is over: the others, which have found it
    over once they took its shards over and crawled them, must not wait for it."""
    gate, opened = keeper("worker-0", "worker-1", "worker-2")
    gate.said("worker-0", over=True)
    gate.ended({**ALL_ALIVE, "worker-2": False})
    assert not opened.is_set() and gate.waiting == ["worker-1"]
    gate.said("worker-1", over=True)
    assert opened.is_set()


def test_the_gate_never_closes_again() -> None:
    gate, opened = keeper("worker-0", "worker-1")
    gate.said("worker-0", over=True)
    gate.said("worker-1", over=True)
    gate.said("worker-0", over=False)
    assert opened.is_set() and gate.waiting == ["worker-0"]


def test_a_worker_says_each_change_of_its_verdict_once() -> None:
    opened = threading.Event()
    words: list[bool] = []
    end = CrawlEnd(SiblingEndGate(opened, words.append))
    end.found_work()  # nothing said yet: it is not over
    for _ in range(3):
        end.found_over()
    assert words == [True] and end.is_over() and not end.may_leave()
    end.found_work()
    end.found_work()
    assert words == [True, False] and not end.is_over()
    opened.set()
    assert not end.may_leave(), "the gate is open, but this worker has work"
    end.found_over()
    assert words == [True, False, True] and end.may_leave()


def test_a_worker_without_siblings_may_leave_once_it_found_the_crawl_over() -> None:
    end = CrawlEnd()
    assert not end.may_leave()
    end.found_over()
    assert end.may_leave()
