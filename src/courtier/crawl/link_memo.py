"""Link canonicalization through a bounded, process-wide memo (:func:`canonicalize_link`).

A page's links are canonicalized twice (its outbox event's link list, then the intake),
and navigation links recur on every page of a host: :func:`courtier.core.urls.canonicalize`
is pure, so a remembered result is the same value, and most links of a crawl are found
here instead of parsed again.
"""

from __future__ import annotations

from courtier.core.urls import MAX_URL_LENGTH, CanonicalUrl, canonicalize


class _LinkMemo:
    """Raw link key → canonical form, in two generations of at most ``limit`` entries.

    A key is written to the young generation; when that is full it becomes the old one
    (the previous old one is dropped) and a new young one starts. A key found only in
    the old generation is written to the young one again, so links that keep recurring
    (navigation, a host's pages seen round after round) survive every rotation, while a
    plain clear-when-full memo would forget all of them at once. At most ``2 × limit``
    entries (~300 B each) are held.
    """

    __slots__ = ("old", "young")

    def __init__(self) -> None:
        self.young: dict[str, CanonicalUrl] = {}
        self.old: dict[str, CanonicalUrl] = {}

    def put(self, key: str, url: CanonicalUrl, limit: int) -> None:
        if len(self.young) >= limit:
            self.old, self.young = self.young, {}
        self.young[key] = url

    def clear(self) -> None:
        self.young, self.old = {}, {}

    def __len__(self) -> int:
        return len(self.young) + len(self.old)

    def __contains__(self, key: object) -> bool:
        return key in self.young or key in self.old


#: :func:`canonicalize_link`'s memo, shared by the intake and the event feed, which read
#: the same links; ``LINK_MEMO_LIMIT`` entries a generation
_LINK_MEMO = _LinkMemo()
LINK_MEMO_LIMIT = 32_768


def link_memo_key(raw: str) -> str:
    """The part of ``raw`` its canonical form depends on: ``raw`` without its fragment.

    In a URL that parses with a special scheme the first ``#`` always starts the
    fragment (it ends the authority, path and query states alike), and canonicalization
    drops the fragment, so links that differ only there (``page#top``, ``page#s3``) are
    one entry: in the large bench farm that is 23,000 distinct keys for 93,000 distinct
    links. Kept whole when cutting could change the answer: a C0 control or space just
    before the ``#`` (trailing ones are stripped from the whole input, not from the
    cut), or an input over :data:`MAX_URL_LENGTH` (rejected for its length as a whole).
    A key only ever maps to a successful parse, whose ``#`` was a fragment start.
    """
    cut = raw.find("#")
    if cut <= 0 or len(raw) > MAX_URL_LENGTH or raw[cut - 1] <= " ":
        return raw
    return raw[:cut]


def canonicalize_link(raw: str) -> CanonicalUrl:
    """``canonicalize(raw)`` (no base) through a bounded process-wide memo.

    A page's links are canonicalized twice (its event's link list, then the intake)
    and navigation links repeat on every page of a host; :func:`canonicalize` is pure,
    so a remembered result is the same value. Entries are keyed by
    :func:`link_memo_key` (the link without its fragment); the memo keeps two
    generations (:class:`_LinkMemo`). Failures are not remembered (they raise
    :class:`~courtier.core.errors.InvalidURL` every time). Thread-safe: single dict reads and
    writes are atomic, and a rotation racing another thread's can only drop entries,
    never give a wrong value.
    """
    key = link_memo_key(raw)
    memo = _LINK_MEMO
    url = memo.young.get(key)
    if url is None:
        url = memo.old.get(key)
        if url is None:
            url = canonicalize(raw)
        memo.put(key, url, LINK_MEMO_LIMIT)
    return url
