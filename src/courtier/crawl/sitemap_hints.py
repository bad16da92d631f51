"""A sitemap's ``lastmod`` for URLs already known: which of them to fetch again now.

A sitemap lists pages that are often known already; a ``lastmod`` later than a page's
last fetch says it changed since. :func:`lastmod_hints` turns a parsed sitemap into
(url_key, lastmod) pairs for :meth:`~courtier.store.base.Store.sitemap_changed`, which
makes due only the rows fetched before that time (rows never fetched are due anyway).
Keys are those the intake gives (canonical form, tracking parameters removed). A
``lastmod`` in the future counts as ``now``, so a page whose sitemap always claims a
future date is fetched once, not at every look at the sitemap. The work is done in
steps of :data:`STEP` entries with the loop given back in between (50,000 entries
would otherwise hold it for a tenth of a second or more); :func:`sitemap_rows` takes
the entries in the same way.
"""

from __future__ import annotations

import asyncio

from courtier.core.errors import InvalidURL
from courtier.core.tracking import TrackingParams
from courtier.crawl.intake import Intake
from courtier.crawl.link_memo import canonicalize_link
from courtier.crawl.process import SITEMAP_PRIORITY, sitemap_hints, with_sitemap_hints
from courtier.parse.sitemaps import SitemapResult
from courtier.store.base import NewUrl

#: entries handled between two yields to the event loop (a step of sitemap intake is
#: ~0.1 ms an entry on a loaded core: 500 stay under the 50 ms rule)
STEP = 500


async def sitemap_rows(result: SitemapResult, intake: Intake, depth: int,
                       now: float) -> list[NewUrl]:
    """The intake's rows for a sitemap's entries and child sitemaps (with their lastmod /
    changefreq), taken in :data:`STEP` at a time with the loop given back in between:
    50,000 entries in one go held it for seconds."""
    raws = [entry.loc for entry in result.urls] + result.sitemaps
    hints = sitemap_hints(result)
    rows: list[NewUrl] = []
    keys: set[bytes] = set()
    for start in range(0, len(raws), STEP):
        step = [row for row in intake.links(raws[start:start + STEP], depth, now,
                                            priority=SITEMAP_PRIORITY, check_traps=False)
                if row.url_key not in keys]  # not a URL listed twice, in two steps
        keys.update(row.url_key for row in step)
        # the hints go on by step too: 50,000 rows rebuilt at once held the loop ~0.3 s
        rows.extend(with_sitemap_hints(hints, step))
        if start + STEP < len(raws):
            await asyncio.sleep(0)
    return rows


async def lastmod_hints(result: SitemapResult, tracking: TrackingParams,
                        now: float) -> list[tuple[bytes, float]]:
    """(url_key, lastmod capped at ``now``) of every entry of ``result`` with a lastmod
    whose loc is a valid URL; invalid ones are skipped (the intake refused them too)."""
    hints: list[tuple[bytes, float]] = []
    for number, entry in enumerate(result.urls, 1):
        if entry.lastmod is not None:
            try:
                url = tracking.clean(canonicalize_link(entry.loc))
            except InvalidURL:
                continue
            hints.append((url.url_key, min(entry.lastmod, now)))
        if number % STEP == 0:
            await asyncio.sleep(0)
    return hints
