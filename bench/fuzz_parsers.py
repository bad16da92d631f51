"""Long fuzz run: the property tests of the parsers, with many more examples.

Runs the same Hypothesis properties the test suite runs (URL
canonicalization, robots.txt parsing, HTML link extraction, the link → trap
pipeline, WARC round trip through warcio) with ``--examples`` examples each
(default 20,000; the WARC property, which writes files, gets a tenth) and
prints, per property, the examples run, failures and time. Exit code 1 if
any property failed (the falsifying example is printed).

    .venv/bin/python bench/fuzz_parsers.py [--examples N] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, settings  # noqa: E402
from tests.unit import test_fuzz_traps, test_fuzz_warc, test_urls  # noqa: E402
from tests.unit.parse import test_html  # noqa: E402
from tests.unit.politeness import test_robots  # noqa: E402

PROPERTIES: list[tuple[str, Callable[..., Any], float]] = [
    ("urls: canonicalize idempotent", test_urls.test_canonicalize_is_idempotent, 1.0),
    ("urls: arbitrary text", test_urls.test_arbitrary_text_only_ever_raises_invalid_url, 1.0),
    ("urls: relative references", test_urls.test_relative_references_are_idempotent, 1.0),
    ("robots: arbitrary bytes", test_robots.test_arbitrary_bytes_never_raise, 1.0),
    ("robots: structured files", test_robots.test_structured_files_never_raise, 1.0),
    ("robots: matcher vs reference", test_robots.test_matcher_agrees_with_reference, 1.0),
    ("html: random bytes", test_html.test_random_bytes_never_raise, 1.0),
    ("html: tag soup", test_html.test_tag_soup_never_raises, 1.0),
    (
        "pipeline: links → traps",
        test_fuzz_traps.test_extracted_links_flow_through_the_pipeline,
        1.0,
    ),
    ("traps: template total", test_fuzz_traps.test_url_template_is_total_and_bounded, 1.0),
    ("traps: static rules", test_fuzz_traps.test_static_rules_never_raise, 1.0),
    ("traps: tracker", test_fuzz_traps.test_tracker_never_raises_and_stays_bounded, 0.25),
    ("warc: round trip (warcio)", test_fuzz_warc.test_warc_round_trip_through_warcio, 0.1),
]


def run(name: str, test: Callable[..., Any], examples: int) -> tuple[int, bool, float]:
    """Run one property with ``examples`` examples; return (calls, ok, seconds)."""
    inner = test.hypothesis.inner_test  # type: ignore[attr-defined]
    calls = 0

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return inner(*args, **kwargs)

    # The tests carry their own @settings; swap them for the run (Hypothesis
    # reads this attribute when the test is called) and restore them after.
    original = test._hypothesis_internal_use_settings  # type: ignore[attr-defined]
    test.hypothesis.inner_test = counting  # type: ignore[attr-defined]
    test._hypothesis_internal_use_settings = settings(  # type: ignore[attr-defined]
        original,
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    start = time.perf_counter()
    ok = True
    try:
        test()
    except Exception:
        ok = False
        traceback.print_exc()
    finally:
        test.hypothesis.inner_test = inner  # type: ignore[attr-defined]
        test._hypothesis_internal_use_settings = original  # type: ignore[attr-defined]
    return calls, ok, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=20_000)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    print(f"{'property':34} {'examples':>9} {'calls':>9} {'seconds':>8} {'µs/call':>8}  result")
    failed = 0
    total_start = time.perf_counter()
    for name, test, share in PROPERTIES:
        if args.only and args.only not in name:
            continue
        examples = max(1, int(args.examples * share))
        calls, ok, seconds = run(name, test, examples)
        failed += not ok
        per_call = seconds / calls * 1e6 if calls else 0.0
        verdict = "ok" if ok else "FAILED"
        print(f"{name:34} {examples:9d} {calls:9d} {seconds:8.1f} {per_call:8.0f}  {verdict}")
        sys.stdout.flush()
    print(f"total {time.perf_counter() - total_start:.1f} s, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
