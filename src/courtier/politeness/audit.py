"""An independent check of every lease the frontier issues.

The frontier enforces politeness; this auditor re-checks its output with its
own bookkeeping (start times and in-flight counts per host), so a bug in the
scheduler shows up as ``courtier_politeness_violations`` instead of as an
angry site owner. It never changes what is fetched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

EPSILON = 1e-6


@dataclass(slots=True)
class LeaseAuditor:
    violations: int = 0
    last: list[str] = field(default_factory=list)     # a few recent descriptions
    _starts: dict[str, tuple[float, float]] = field(default_factory=dict)  # host → (start, gap)
    _in_flight: dict[str, int] = field(default_factory=dict)

    def on_issue(self, host_key: str, now: float, delay: float, max_in_flight: int) -> bool:
        """Record a lease start; True when it breaks the previous delay or the cap."""
        problem = None
        previous = self._starts.get(host_key)
        if previous is not None and now + EPSILON < previous[0] + previous[1]:
            problem = f"{host_key}: start {now - previous[0]:.3f}s after the previous one " \
                      f"(delay {previous[1]:.3f}s)"
        count = self._in_flight.get(host_key, 0) + 1
        if count > max_in_flight:
            problem = f"{host_key}: {count} requests in flight (cap {max_in_flight})"
        self._starts[host_key] = (now, delay)
        self._in_flight[host_key] = count
        if problem is not None:
            self.violations += 1
            self.last = [*self.last[-9:], problem]
        return problem is not None

    def on_finish(self, host_key: str) -> None:
        count = self._in_flight.get(host_key, 0) - 1
        if count <= 0:
            self._in_flight.pop(host_key, None)
        else:
            self._in_flight[host_key] = count

    def forget(self, keep_after: float) -> None:
        """Drop hosts idle since ``keep_after`` (memory bounded by active hosts)."""
        for key in [k for k, (start, gap) in self._starts.items()
                    if start + gap < keep_after and k not in self._in_flight]:
            del self._starts[key]
