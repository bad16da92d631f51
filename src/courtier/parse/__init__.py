"""parse: HTML out-links, meta robots directives, charset sniffing (and sitemaps).

The HTML entry point is :func:`courtier.parse.html.parse_html`; charset
handling lives in :mod:`courtier.parse.charset`.
"""

from courtier.parse.charset import decode_html, sniff_encoding
from courtier.parse.html import Link, ParsedPage, parse_html

__all__ = ["Link", "ParsedPage", "decode_html", "parse_html", "sniff_encoding"]
