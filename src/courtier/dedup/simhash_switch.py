"""When a crawl loads the compiled SimHash path: once the numpy path has cost as much
as loading it would.

Loading numba and the cached kernels costs about half a CPU-second (numba's import
~0.15 s, the cached machine code ~0.3 s: ``bench/README.md``, "Start-up"); per page the
compiled path saves 0.13–0.45 ms (``bench/simhash_bench.py``: 400 to 4,000 words,
ASCII or not). A crawl of a few hundred pages never earns the load back; a large one
earns it within its first few thousand pages. How large a crawl will be is not known
when it starts, so the crawl rents before it buys: pages take the numpy path, whose
CPU time is added up, until it reaches what a load costs (``LOAD_COST``); then the
kernels are loaded in a thread while the numpy path goes on, and pages take the
compiled path once they are ready. A crawl so pays at most about twice what the better
choice, made in hindsight, would have cost, and a small crawl never pays for the load.
Both paths give the same fingerprints (``tests/unit/dedup/test_simhash_compiled.py``),
so the switch changes no result.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

#: CPU seconds loading numba and the cached SimHash kernels takes (measured 0.42–0.58 s
#: on the 2-core benchmark machine, bench/README.md "Start-up")
LOAD_COST = 0.5


def _prepare_compiled() -> bool:
    from courtier.dedup.simhash import prepare_compiled

    return prepare_compiled()


class CompiledSwitch:
    """Counts the CPU time the numpy path spends (:meth:`spent`) and, once it reaches
    ``after`` seconds, runs ``load`` (by default ``simhash.prepare_compiled``) once in a
    thread of its own (a daemon: a crawl that ends meanwhile does not wait for it).
    ``counting`` is False from then on, so callers stop measuring. ``loaded`` is set when
    ``load`` has returned, whatever it returned (it may fall back to numpy). Time spent
    by the compiled path, when something else loaded it, counts the same: the load it
    then triggers returns at once."""

    def __init__(self, after: float = LOAD_COST,
                 load: Callable[[], object] = _prepare_compiled) -> None:
        self.after = after
        self._load = load
        self.counting = True
        self.total = 0.0
        self.loaded = threading.Event()

    def spent(self, seconds: float) -> None:
        """The numpy path just took ``seconds`` of CPU time for one page."""
        if not self.counting:
            return
        self.total += seconds
        if self.total >= self.after:
            self.counting = False
            threading.Thread(target=self._run, name="simhash-compile", daemon=True).start()

    def _run(self) -> None:
        try:
            self._load()
        finally:
            self.loaded.set()
