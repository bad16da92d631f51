"""Character-encoding sniffing and decoding of HTML bodies.

:func:`sniff_encoding` follows the WHATWG HTML "determine the character
encoding" steps that a crawler can apply without running scripts:

1. a byte-order mark (UTF-8, UTF-16LE, UTF-16BE) wins over everything;
2. then the ``charset`` parameter of the HTTP ``Content-Type`` header;
3. then the ``<meta charset>`` / ``<meta http-equiv="content-type">`` *prescan*
   of the first 1024 bytes. When that finds nothing the same pass continues up
   to the ``<body`` tag (at most :data:`EXTENDED_PRESCAN_BYTES`), standing in
   for the browser's "change the encoding" step when the tokenizer meets a
   later ``<meta>`` in the head;
4. else the default ``windows-1252``.

Labels are mapped through the WHATWG label table and returned as lower-case
names that Python's :mod:`codecs` accepts (``"utf-8"``, ``"windows-1252"``,
``"iso-8859-2"``, ``"shift_jis"``, ``"euc-jp"``…). Unknown labels, and the
WHATWG "replacement" labels, are ignored. Following WHATWG, ``latin1``,
``iso-8859-1`` and ``ascii`` mean ``windows-1252``, and a ``<meta>``-declared
UTF-16 means UTF-8. ``x-user-defined`` is read as ``windows-1252``.

Legacy CJK encodings are decoded with the superset codec WHATWG specifies
(``shift_jis`` with cp932, ``euc-kr`` with cp949, ``gbk`` with gb18030,
``big5`` with big5hkscs); see :func:`python_decoder`.

:func:`decode_html` never raises: it decodes with ``errors="replace"``.
"""

from __future__ import annotations

import re

__all__ = [
    "DEFAULT_ENCODING",
    "EXTENDED_PRESCAN_BYTES",
    "PRESCAN_BYTES",
    "decode_html",
    "http_charset",
    "lookup_label",
    "prepare_html",
    "prescan",
    "python_decoder",
    "sniff_encoding",
    "sniff_encoding_ex",
]

DEFAULT_ENCODING = "windows-1252"
#: the WHATWG prescan window
PRESCAN_BYTES = 1024
#: how far the prescan continues when the first 1024 bytes declare nothing
EXTENDED_PRESCAN_BYTES = 64 * 1024

# encoding name we return -> WHATWG labels (whitespace-separated) for it
_LABELS: dict[str, str] = {
    "utf-8": "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8",
    "ibm866": "866 cp866 csibm866 ibm866",
    "iso-8859-2": "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 "
    "iso_8859-2:1987 l2 latin2",
    "iso-8859-3": "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 "
    "iso_8859-3:1988 l3 latin3",
    "iso-8859-4": "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 "
    "iso_8859-4:1988 l4 latin4",
    "iso-8859-5": "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 "
    "iso_8859-5 iso_8859-5:1988",
    "iso-8859-6": "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 "
    "iso-8859-6 iso-8859-6-e iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 "
    "iso_8859-6:1987",
    "iso-8859-7": "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 "
    "iso8859-7 iso88597 iso_8859-7 iso_8859-7:1987 sun_eu_greek",
    # iso-8859-8-i (logical order) decodes exactly like iso-8859-8
    "iso-8859-8": "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 "
    "iso8859-8 iso88598 iso_8859-8 iso_8859-8:1988 visual csiso88598i iso-8859-8-i logical",
    "iso-8859-10": "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6",
    "iso-8859-13": "iso-8859-13 iso8859-13 iso885913",
    "iso-8859-14": "iso-8859-14 iso8859-14 iso885914",
    "iso-8859-15": "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9",
    "iso-8859-16": "iso-8859-16",
    "koi8-r": "cskoi8r koi koi8 koi8-r koi8_r",
    "koi8-u": "koi8-ru koi8-u",
    "macintosh": "csmacintosh mac macintosh x-mac-roman",
    "cp874": "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874",
    "windows-1250": "cp1250 windows-1250 x-cp1250",
    "windows-1251": "cp1251 windows-1251 x-cp1251",
    "windows-1252": "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 "
    "iso-ir-100 iso8859-1 iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii "
    "windows-1252 x-cp1252 x-user-defined",
    "windows-1253": "cp1253 windows-1253 x-cp1253",
    "windows-1254": "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 "
    "iso_8859-9 iso_8859-9:1989 l5 latin5 windows-1254 x-cp1254",
    "windows-1255": "cp1255 windows-1255 x-cp1255",
    "windows-1256": "cp1256 windows-1256 x-cp1256",
    "windows-1257": "cp1257 windows-1257 x-cp1257",
    "windows-1258": "cp1258 windows-1258 x-cp1258",
    "mac-cyrillic": "x-mac-cyrillic x-mac-ukrainian",
    "gbk": "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk",
    "gb18030": "gb18030",
    "big5": "big5 big5-hkscs cn-big5 csbig5 x-x-big5",
    "euc-jp": "cseucpkdfmtjapanese euc-jp x-euc-jp",
    "iso-2022-jp": "csiso2022jp iso-2022-jp",
    "shift_jis": "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis",
    "euc-kr": "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 "
    "ks_c_5601-1989 ksc5601 ksc_5601 windows-949",
    "utf-16be": "unicodefffe utf-16be",
    "utf-16le": "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le",
}
_LABEL_TO_NAME: dict[str, str] = {
    label: name for name, labels in _LABELS.items() for label in labels.split()
}
# WHATWG decoders are supersets of the plain codecs for these legacy encodings
_DECODER: dict[str, str] = {
    "gbk": "gb18030",
    "big5": "big5hkscs",
    "shift_jis": "cp932",
    "euc-kr": "cp949",
}
# encodings in which a pure-ASCII body does not read as ASCII
_ASCII_COMPATIBLE_EXCEPTIONS = frozenset({"utf-16le", "utf-16be", "iso-2022-jp"})
_UTF16 = frozenset({"utf-16le", "utf-16be"})
_WS = b"\t\n\x0c\r "
_SKIP_WS = re.compile(rb"[\t\n\x0c\r ]*")
_SKIP_WS_SLASH = re.compile(rb"[\t\n\x0c\r /]*")
_ATTR_NAME = re.compile(rb"[^\t\n\x0c\r />][^\t\n\x0c\r />=]*")
_UNQUOTED = re.compile(rb"[^\t\n\x0c\r >]*")
_TAG_NAME = re.compile(rb"[^\t\n\x0c\r >]*")
_META_OPEN = re.compile(rb"<meta[\t\n\x0c\r /]", re.IGNORECASE)
_CHARSET_WORD = re.compile(rb"charset", re.IGNORECASE)
_BODY_OPEN = re.compile(rb"<body[\t\n\x0c\r />]", re.IGNORECASE)
_CHARSET_IN_CONTENT = re.compile(rb"charset[\t\n\x0c\r ]*=[\t\n\x0c\r ]*", re.IGNORECASE)
_CONTENT_VALUE = re.compile(rb"[^\t\n\x0c\r ;]*")
_HTTP_CHARSET = re.compile(r"""charset\s*=\s*["']?([^"';,\s]*)""", re.IGNORECASE)


def _end(pattern: re.Pattern[bytes], buf: bytes, pos: int) -> int:
    """End of ``pattern``'s match at ``pos`` (the patterns used always match)."""
    m = pattern.match(buf, pos)
    return pos if m is None else m.end()


class _EndOfInput(Exception):
    """Internal: the prescan ran past the end of its window."""


def lookup_label(label: str | bytes) -> str | None:
    """The encoding name for a WHATWG label, or None if the label is unknown."""
    if isinstance(label, bytes):
        label = label.decode("latin-1")
    return _LABEL_TO_NAME.get(label.strip("\t\n\x0c\r ").lower())


def _get_attribute(buf: bytes, pos: int) -> tuple[bytes, bytes, int] | None:
    """WHATWG "get an attribute": (name, value, new position) or None at ``>``.

    Names and values are ASCII-lower-cased. Raises :class:`_EndOfInput` when the
    window ends before the attribute does.
    """
    n = len(buf)
    pos = _end(_SKIP_WS_SLASH, buf, pos)
    if pos >= n:
        raise _EndOfInput
    if buf[pos] == 0x3E:  # '>'
        return None
    end = _end(_ATTR_NAME, buf, pos)
    name = buf[pos:end].lower()
    pos = end
    if pos >= n:
        raise _EndOfInput
    if buf[pos] in b"/>":
        return name, b"", pos
    pos = _end(_SKIP_WS, buf, pos)
    if pos >= n:
        raise _EndOfInput
    if buf[pos] != 0x3D:  # '='
        return name, b"", pos
    pos = _end(_SKIP_WS, buf, pos + 1)
    if pos >= n:
        raise _EndOfInput
    c = buf[pos]
    if c in b"\"'":
        close = buf.find(bytes((c,)), pos + 1)
        if close < 0:
            raise _EndOfInput
        return name, buf[pos + 1 : close].lower(), close + 1
    if c == 0x3E:
        return name, b"", pos
    end = _end(_UNQUOTED, buf, pos + 1)
    if end >= n:
        raise _EndOfInput
    return name, buf[pos:end].lower(), end


def _charset_from_content(content: bytes) -> str | None:
    """WHATWG "extract a character encoding from a meta element" (raw label)."""
    m = _CHARSET_IN_CONTENT.search(content)
    if m is None:
        return None
    rest = content[m.end() :]
    if not rest:
        return None
    if rest[:1] in (b'"', b"'"):
        close = rest.find(rest[:1], 1)
        return None if close < 0 else rest[1:close].decode("latin-1")
    return _CONTENT_VALUE.match(rest).group().decode("latin-1")  # type: ignore[union-attr]


def _meta_encoding(buf: bytes, pos: int) -> tuple[str | None, int]:
    """Process the attributes of a ``<meta`` tag starting at ``pos``.

    Returns (encoding or None, position of the byte after the tag's attributes).
    """
    seen: set[bytes] = set()
    got_pragma = False
    need_pragma: bool | None = None
    charset: str | None = None
    charset_failed = False
    while True:
        attr = _get_attribute(buf, pos)
        if attr is None:
            break
        name, value, pos = attr
        if name in seen:
            continue
        seen.add(name)
        if name == b"http-equiv":
            if value == b"content-type":
                got_pragma = True
        elif name == b"content":
            if charset is None and not charset_failed:
                label = _charset_from_content(value)
                if label is not None:
                    charset = lookup_label(label)
                    charset_failed = charset is None
                    need_pragma = True
        elif name == b"charset":
            charset = lookup_label(value)
            charset_failed = charset is None
            need_pragma = False
    if need_pragma is None or (need_pragma and not got_pragma) or charset is None:
        return None, pos
    if charset in _UTF16:
        return "utf-8", pos
    return charset, pos


def prescan(body: bytes, limit: int = PRESCAN_BYTES) -> str | None:
    """WHATWG "prescan a byte stream to determine its encoding" over ``body[:limit]``."""
    buf = body[:limit]
    n = len(buf)
    # every answer comes from a "<meta" tag holding the word "charset": cheap gates
    if _META_OPEN.search(buf) is None or _CHARSET_WORD.search(buf) is None:
        return None
    pos = 0
    try:
        while True:
            pos = buf.find(b"<", pos)
            if pos < 0 or pos + 1 >= n:
                return None
            if buf.startswith(b"<!--", pos):
                end = buf.find(b"-->", pos + 2)
                if end < 0:
                    return None
                pos = end + 3
                continue
            if _META_OPEN.match(buf, pos):
                encoding, pos = _meta_encoding(buf, pos + 6)
                if encoding is not None:
                    return encoding
                pos += 1
                continue
            c = buf[pos + 1]
            start = pos + 2 if c == 0x2F else pos + 1  # '</x' or '<x'
            if start < n and 0x61 <= (buf[start] | 0x20) <= 0x7A:  # ASCII letter
                pos = _end(_TAG_NAME, buf, start)
                while True:
                    attr = _get_attribute(buf, pos)
                    if attr is None:
                        break
                    pos = attr[2]
                pos += 1
                continue
            if c in b"!/?":
                end = buf.find(b">", pos + 1)
                if end < 0:
                    return None
                pos = end + 1
                continue
            pos += 1
    except _EndOfInput:
        return None


def _extended_prescan(body: bytes) -> str | None:
    """The prescan continued past 1024 bytes, up to the ``<body`` tag.

    Browsers switch encoding when the tokenizer meets a ``<meta charset>`` after
    the prescan window; this approximates that for the document head, bounded
    by :data:`EXTENDED_PRESCAN_BYTES`.
    """
    window = body[:EXTENDED_PRESCAN_BYTES]
    stop = _BODY_OPEN.search(window)
    if stop is not None:
        window = window[: stop.start()]
    if len(window) <= PRESCAN_BYTES:
        return None
    return prescan(window, len(window))


def _bom(body: bytes) -> str | None:
    if body.startswith(b"\xef\xbb\xbf"):
        return "utf-8"
    if body.startswith(b"\xfe\xff"):
        return "utf-16be"
    if body.startswith(b"\xff\xfe"):
        return "utf-16le"
    return None


def http_charset(content_type: str | None) -> str | None:
    """The encoding named by a ``Content-Type`` header's charset, if known."""
    if not content_type:
        return None
    m = _HTTP_CHARSET.search(content_type)
    if m is None:
        return None
    return lookup_label(m.group(1))


def sniff_encoding_ex(body: bytes, content_type: str | None) -> tuple[str, str]:
    """Like :func:`sniff_encoding`, also saying where the answer came from.

    The source is one of ``"bom"``, ``"http"``, ``"meta"`` or ``"default"``.
    """
    found = _bom(body)
    if found is not None:
        return found, "bom"
    found = http_charset(content_type)
    if found is not None:
        return found, "http"
    found = prescan(body, PRESCAN_BYTES)
    if found is None and len(body) > PRESCAN_BYTES:
        found = _extended_prescan(body)
    if found is not None:
        return found, "meta"
    return DEFAULT_ENCODING, "default"


def sniff_encoding(body: bytes, content_type: str | None) -> str:
    """The encoding to decode ``body`` with: BOM > HTTP charset > meta prescan > windows-1252.

    Never raises. The result is a lower-case name accepted by :mod:`codecs`.
    """
    return sniff_encoding_ex(body, content_type)[0]


def prepare_html(body: bytes, content_type: str | None) -> tuple[bytes | str, str]:
    """The input to hand an HTML parser, and the encoding it was read with.

    Returns UTF-8 ``bytes`` when the body can be parsed as-is (UTF-8, or pure
    ASCII in an ASCII-compatible encoding; a UTF-8 BOM is removed), else the
    decoded ``str`` (errors replaced). The encoding follows
    :func:`decode_html`'s rules. Never raises.
    """
    encoding, source = sniff_encoding_ex(body, content_type)
    if source == "bom":
        if encoding == "utf-8":
            return body[3:], encoding
        return body[2:].decode(encoding, "replace"), encoding
    if encoding == "utf-8":
        return body, encoding
    if body.isascii():
        if encoding in _ASCII_COMPATIBLE_EXCEPTIONS:
            return body.decode(encoding, "replace"), encoding
        return body, encoding
    if source == "default":
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return body, "utf-8"
    return body.decode(_DECODER.get(encoding, encoding), "replace"), encoding


def decode_html(body: bytes, content_type: str | None) -> tuple[str, str]:
    """Decode an HTML body: returns ``(text, encoding)``; never raises.

    The encoding is :func:`sniff_encoding`'s answer with one pragmatic
    exception: when nothing declares an encoding (no BOM, header or meta) and
    the body is valid, non-ASCII UTF-8, it is decoded as ``"utf-8"`` (such a
    body is almost never meant as windows-1252; browsers with a detector agree).
    A BOM is removed from the text. Undecodable bytes become U+FFFD.
    """
    markup, encoding = prepare_html(body, content_type)
    if isinstance(markup, str):
        return markup, encoding
    return markup.decode("utf-8", "replace"), encoding


def python_decoder(encoding: str) -> str:
    """The codec to actually decode with for an encoding name from this module."""
    return _DECODER.get(encoding, encoding)
