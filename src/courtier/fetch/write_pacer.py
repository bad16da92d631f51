"""The last per-address gap, kept at the moment a request is written.

The frontier (and, with many workers, the store's IP slots) charge ``--ip-delay``
when they grant a request. Between the grant and the moment the request's bytes
reach the socket lie store round trips (the IP slot, the day count written ahead)
and the connection's set-up; a request held up there can reach the server after
the one granted next, closer to it than the delay allows (seen in CI: two requests
of one worker to one address 0.022 s apart against a delay of 0.3 s). The
:class:`AddressPacer` is asked once the connection stands, right before the
request is written: it waits until ``gap`` seconds have passed since the last
request this process wrote to that address, then notes the new one.

It keeps one start time per address it saw within the last ``gap`` seconds; older
ones are dropped as it goes, so its size follows the addresses in use, not the
crawl's length. Pure logic over a :class:`~courtier.core.clock.Clock`.
"""

from __future__ import annotations

from courtier.core.clock import Clock

__all__ = ["AddressPacer"]

#: addresses noted before the map is swept for ones whose gap has passed
SWEEP_EVERY = 1024


class AddressPacer:
    def __init__(self, clock: Clock, gap: float) -> None:
        if gap <= 0:
            raise ValueError(f"the gap between writes to one address must be > 0, not {gap}")
        self.clock = clock
        self.gap = gap
        self.waits = 0           # requests that had to wait for their turn
        self._last: dict[str, float] = {}
        self._since_sweep = 0

    async def wait_turn(self, address: str) -> None:
        """Return once a request to ``address`` may be written (``gap`` seconds after
        the last one noted), noting it as written now. Waiters for one address each
        get their own turn, ``gap`` apart."""
        waited = False
        while True:
            now = self.clock.now()
            last = self._last.get(address)
            ready = now if last is None else last + self.gap
            if now >= ready:
                self._note(address, now)
                if waited:
                    self.waits += 1
                return
            waited = True
            await self.clock.sleep(ready - now)

    def _note(self, address: str, now: float) -> None:
        self._last[address] = now
        self._since_sweep += 1
        if self._since_sweep >= SWEEP_EVERY:
            self._since_sweep = 0
            horizon = now - self.gap
            for stale in [a for a, at in self._last.items() if at <= horizon]:
                del self._last[stale]

    def __len__(self) -> int:
        return len(self._last)
