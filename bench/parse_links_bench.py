"""Per-page CPU cost of ``parse_html`` on a ~30 KB page with ~120 links (anchors, rel).

Prints µs per page (best of several rounds) with and without the visible text.
Run: ``.venv/bin/python bench/parse_links_bench.py``.
"""

from __future__ import annotations

import random
import time

from courtier.parse.html import parse_html

URL = "http://www.example.test/section/page.html"


def page(n_links: int = 120, size: int = 30_000) -> bytes:
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "omega", "lantern", "meadow", "copper"]
    parts = ["<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>A page</title>",
             '<link rel=canonical href="/section/page.html"></head><body><nav><ul>']
    rels = ["", ' rel="nofollow"', ' rel="sponsored"', ' rel="ugc nofollow"', ""]
    for i in range(n_links):
        text = " ".join(rng.choice(words) for _ in range(rng.randrange(1, 5)))
        href = f"/section/{i}.html" if i % 3 else f"https://other{i % 7}.test/p/{i}"
        parts.append(f'<li><a href="{href}"{rels[i % 5]}><span>{text}</span> {i}</a></li>')
    parts.append("</ul></nav>")
    body = "".join(parts)
    while len(body) < size:
        body += "<p>" + " ".join(rng.choice(words) for _ in range(40)) + "</p>\n"
    return (body + "</body></html>").encode()


def measure(body: bytes, want_text: bool, rounds: int = 7, per_round: int = 200) -> float:
    best = float("inf")
    for _ in range(rounds):
        began = time.perf_counter()
        for _ in range(per_round):
            parse_html(body, URL, "text/html; charset=utf-8", want_text=want_text)
        best = min(best, (time.perf_counter() - began) / per_round)
    return best * 1e6


def main() -> None:
    body = page()
    parsed = parse_html(body, URL, "text/html")
    print(f"page: {len(body)} bytes, {len(parsed.links)} links")
    print(f"parse_html without text: {measure(body, False):.0f} µs/page")
    print(f"parse_html with text:    {measure(body, True):.0f} µs/page")


if __name__ == "__main__":
    main()
