"""The compiled SimHash path is loaded once the numpy path has cost what a load costs,
in a thread of its own, once; SimHash itself never starts a load."""

from __future__ import annotations

import threading

import pytest

from courtier.dedup import simhash
from courtier.dedup.pages import DuplicateTracker
from courtier.dedup.simhash import simhash64
from courtier.dedup.simhash_switch import CompiledSwitch

TEXT = "a page of plain words long enough to be compared with the others " * 4


class Loads:
    """A stand-in load: counts its calls and the threads they ran in."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def __call__(self) -> bool:
        self.threads.append(threading.get_ident())
        return True


def test_the_load_starts_once_the_numpy_path_has_cost_as_much() -> None:
    """Seen red with ``counting`` left on after the load started (a second load ran at the
    next report) and with the total compared as ``>`` the threshold plus one report."""
    loads = Loads()
    switch = CompiledSwitch(after=1.0, load=loads)
    switch.spent(0.4)
    switch.spent(0.4)
    assert switch.counting and not switch.loaded.is_set() and loads.threads == []
    switch.spent(0.2)  # 1.0 in all: as much as the load costs
    assert not switch.counting
    assert switch.loaded.wait(30)
    switch.spent(5.0)
    assert len(loads.threads) == 1 and loads.threads[0] != threading.get_ident()


def test_the_tracker_reports_the_numpy_paths_time() -> None:
    """Seen red with the tracker not telling its switch (no load ever started)."""
    loads = Loads()
    switch = CompiledSwitch(after=1e-9, load=loads)
    tracker = DuplicateTracker(switch=switch)
    fp, twin = tracker.fingerprint(b"\x03" * 16, TEXT)
    assert (fp, twin) == (simhash64(TEXT), None)
    assert switch.loaded.wait(30) and len(loads.threads) == 1
    assert switch.total > 0


def test_simhash_words_never_starts_a_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before anything loaded the kernels, pages take the numpy path and nothing is loaded
    (a load on the event loop would stall it ~0.5 s). Seen red with ``simhash_words``
    calling ``compiled_kernels()`` again."""
    monkeypatch.setattr(simhash, "_kernels", None)
    assert simhash.simhash_words(TEXT) == (simhash64(TEXT), len(TEXT.split()))
    assert simhash._kernels is None
