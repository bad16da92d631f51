"""The start gate of ``crawl --workers N`` (cluster/start_gate.py): the parent's keeper
opens it once every child has registered or ended; a child announces itself once.

Seen red on a scratch edit (restored since): ``GateKeeper.ended`` opening the gate at
once when a child ends (the two still unregistered siblings no longer awaited), and
``SiblingGate.registered`` announcing on every call.
"""

from __future__ import annotations

import threading

from courtier.cluster.start_gate import GateKeeper, SiblingGate


def keeper(*names: str) -> tuple[GateKeeper, threading.Event]:
    opened = threading.Event()
    return GateKeeper(names, opened), opened


def test_the_gate_opens_when_the_last_child_registers() -> None:
    gate, opened = keeper("worker-0", "worker-1", "worker-2")
    gate.registered("worker-1")
    gate.registered("worker-1")  # a child registers once; a repeat changes nothing
    gate.registered("worker-0")
    assert not opened.is_set() and gate.waiting == ["worker-2"]
    gate.registered("worker-2")
    assert opened.is_set() and gate.waiting == [] and gate.gone == []


def test_a_child_that_ended_before_registering_is_not_awaited() -> None:
    gate, opened = keeper("worker-0", "worker-1", "worker-2")
    gate.registered("worker-0")
    gate.ended({"worker-0": False, "worker-1": True, "worker-2": False})
    # worker-0 registered before it ended; worker-2 never did: only worker-1 is awaited
    assert gate.gone == ["worker-2"] and gate.waiting == ["worker-1"]
    assert not opened.is_set()
    gate.registered("worker-1")
    assert opened.is_set()


def test_the_gate_opens_when_the_children_still_awaited_have_all_ended() -> None:
    gate, opened = keeper("worker-0", "worker-1")
    gate.registered("worker-0")
    gate.ended({"worker-0": True, "worker-1": True})
    assert not opened.is_set()
    gate.ended({"worker-0": True, "worker-1": False})
    assert opened.is_set() and gate.gone == ["worker-1"]


def test_a_child_announces_its_registration_once_and_reads_the_parents_flag() -> None:
    opened = threading.Event()
    sent: list[str] = []
    child = SiblingGate(opened, lambda: sent.append("registered"))
    for _ in range(3):
        child.registered()
    assert sent == ["registered"] and not child.is_open()
    opened.set()
    assert child.is_open()
