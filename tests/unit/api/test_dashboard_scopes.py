"""The dashboard says which figures are the whole crawl's and which the serving worker's
(issue #36: it mixed one worker's figures with crawl-wide ones without saying so). Each
section's label must match where its figures come from in ``GET /v1/stats``
(``FIGURE_SCOPES``). Red with a label removed or swapped."""

from __future__ import annotations

from pathlib import Path

from selectolax.lexbor import LexborHTMLParser

import courtier.api
from courtier.api.crawl_figures import FIGURE_SCOPES

#: section heading -> the /v1/stats key it shows
SECTIONS = {"Throughput": "status", "Status codes": "status_mix", "Politeness": "politeness",
            "Budget": "budget", "Top hosts by queue": "status"}
LABELS = {"crawl_wide": "whole crawl", "this_worker": "this worker"}


def test_every_figures_section_is_labelled_with_its_scope() -> None:
    html = (Path(courtier.api.__file__).parent / "dashboard.html").read_text()
    headings = {}
    for h2 in LexborHTMLParser(html).css("h2"):
        scope = h2.css_first("small.scope")
        title = h2.text(deep=False).strip()
        headings[title] = scope.text() if scope is not None else None
    for title, key in SECTIONS.items():
        scope = next(name for name, keys in FIGURE_SCOPES.items() if key in keys)
        assert headings[title] is not None and headings[title].startswith(LABELS[scope]), (
            title, headings[title])
    assert headings["Top hosts by errors"] == "whole crawl"  # tallied from the outbox
    assert 'id="workers"' in html and "live_workers" in html
