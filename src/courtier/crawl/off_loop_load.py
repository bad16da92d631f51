"""Work done once, in a thread, the first time a crawl needs it: an import too slow for
the event loop (numpy and the SimHash code: ~0.1 CPU-s, which a crawl need not pay before
its first request).

:meth:`OffLoopLoad.start` begins it without waiting (the fetcher does so as it sends its
first page request, so the import overlaps the wait for the answer); :meth:`ready` waits
for it without holding the loop, and returns at once from then on. A load that raised
raises again at every :meth:`ready`. When ``loaded()`` says there is nothing to do (the
modules were imported already, as in the simulator, whose virtual clock must not run on
while a thread works), no thread is started at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class OffLoopLoad:
    def __init__(self, load: Callable[[], object],
                 loaded: Callable[[], bool] = lambda: False) -> None:
        self._load = load
        self._loaded = loaded
        self._task: asyncio.Future[object] | None = None
        self.done = False

    def start(self) -> None:
        """Begin the load in a thread unless it has begun or has nothing to do (inside
        the running loop)."""
        if self._task is None and not self.done:
            if self._loaded():
                self.done = True
                return
            self._task = asyncio.ensure_future(asyncio.to_thread(self._load))

    async def ready(self) -> None:
        """Until the load has finished (begun here if it had not); a cancelled waiter
        leaves it running for the others."""
        if self.done:
            return
        self.start()
        if self._task is None:
            return
        await asyncio.shield(self._task)
        self.done = True
