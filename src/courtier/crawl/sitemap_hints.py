"""A sitemap's ``lastmod`` for URLs already known: which of them to fetch again now.

A sitemap lists pages that are often known already; a ``lastmod`` later than a page's
last fetch says it changed since. :func:`lastmod_hints` turns a parsed sitemap into
(url_key, lastmod) pairs for :meth:`~courtier.store.base.Store.sitemap_changed`, which
makes due only the rows fetched before that time (rows never fetched are due anyway).
Keys are those the intake gives (canonical form, tracking parameters removed). A
``lastmod`` in the future counts as ``now``, so a page whose sitemap always claims a
future date is fetched once, not at every look at the sitemap. The work is done in
steps of :data:`STEP` entries with the loop given back in between (50,000 entries
would otherwise hold it for a tenth of a second or more).
"""

from __future__ import annotations

import asyncio

from courtier.core.errors import InvalidURL
from courtier.core.tracking import TrackingParams
from courtier.crawl.link_memo import canonicalize_link
from courtier.parse.sitemaps import SitemapResult

#: entries handled between two yields to the event loop
STEP = 2_000


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
