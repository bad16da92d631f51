"""The per-page outputs of this tree and of another, over the bench's pages: equal or not.

A CPU change must not change what a crawl stores. This script replays the per-page
stages (parse and links, the event's page fields as outbox JSON, SimHash with the
near-duplicate index, the intake's rows with scope and trap rules, the payload digest,
the needs-guard verdict, the WARC request + response records) in a fresh interpreter
per tree, digests every output, and prints the digests side by side. WARC record ids
are made deterministic for the replay; the warcinfo record (file name, wall-clock
date) and record offsets are left out.

    git archive <ref> src | tar -x -C /tmp/before
    .venv/bin/python bench/page_outputs_compare.py --before-src /tmp/before/src

It needs no server: the pages come from ``static_web.generate`` (same generator and
seed as ``crawl_vs_scrapy.py``; 200 hosts x 30 pages by default). Exit status 1 when
any output differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: run in a fresh interpreter with PYTHONPATH set to the tree under test
CHILD = r"""
import hashlib, itertools, json, sys, tempfile, zlib
from pathlib import Path
import courtier.archive.warc as W
from courtier.archive.warc import WarcWriter
from courtier.archive.warc_fields import sha256_digest
from courtier.core.config import build_config
from courtier.dedup.pages import DuplicateTracker
from courtier.events.feed import page_fields
from courtier.fetch.transport import FetchResponse
from courtier.frontier.traps import TemplateTracker
from courtier.crawl.intake import Intake, Scope
from courtier.parse.guard import needs_guard
from courtier.parse.html import parse_html
from courtier.core.urls import canonicalize

pages, port = sorted(str(p) for p in Path(sys.argv[1]).glob("*/p/*.html")), int(sys.argv[2])
ids = itertools.count()
# the writer's record ids made deterministic: trees before the split of archive/warc_fields.py
# call warc._record_id, later ones the record_id that warc.py imports
for name in ("_record_id", "record_id"):
    setattr(W, name, lambda: f"<urn:uuid:{next(ids):032d}>")
hosts = sorted({p.split("/")[-3] for p in pages})
config = build_config({"seeds": (), "scope": "seeds-hosts"})
intake = Intake(Scope(config, [canonicalize(f"http://{h}:{port}/") for h in hosts]),
                traps=TemplateTracker())
tracker = DuplicateTracker()
tmp = tempfile.mkdtemp()
writer = WarcWriter(tmp)
out = {k: hashlib.sha256() for k in ("parse", "event", "simhash", "intake", "digest",
                                      "guard", "warc")}
for i, p in enumerate(pages):
    body = Path(p).read_bytes()
    url = f"http://{p.split('/')[-3]}:{port}/p/{p.split('/')[-1]}"
    out["guard"].update(b"1" if needs_guard(body) else b"0")
    page = parse_html(body, url, "text/html", None, agent_token="courtier", want_text=True,
                      collapse_text=False)
    out["parse"].update(repr((page.links, page.base_url, page.title, page.canonical,
                              page.meta_noindex, page.meta_nofollow, page.encoding,
                              page.lang, page.robots_meta)).encode())
    out["event"].update(json.dumps(page_fields(page, None), separators=(",", ":"),
                                   allow_nan=False).encode())
    fp, twin = tracker.fingerprint(canonicalize(url).url_key, page.text)
    out["simhash"].update(f"{fp},{twin};".encode())
    rows = intake.links([link.url for link in page.links if not link.nofollow], 1, 1e9 + i)
    out["intake"].update(repr(rows).encode())
    out["digest"].update(sha256_digest(body).encode())
    resp = FetchResponse(url=url, status=200, reason="OK", http_version="1.1",
                         headers=[("Content-Type", "text/html"),
                                  ("Content-Length", str(len(body)))],
                         raw_body=body, body=body, request_headers=[("User-Agent", "bench")],
                         started_at=1e9 + i)
    rec = writer.write_exchange(resp, warc_date=1e9 + i)
    out["warc"].update(repr((rec.location.length, rec.payload_digest,
                             rec.block_digest)).encode())
name = writer.current_file
writer.close()
inflate = zlib.decompressobj(31)
inflate.decompress(Path(tmp, name).read_bytes())  # the warcinfo member
out["warc"].update(inflate.unused_data)           # every other member, as written
print(json.dumps({k: v.hexdigest() for k, v in out.items()}))
"""


def run_child(src: Path, www: Path, port: int) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(src))
    done = subprocess.run([sys.executable, "-c", CHILD, str(www), str(port)],
                          env=env, capture_output=True, text=True, check=True)
    result: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before-src", type=Path, required=True, help="the src/ tree to compare")
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--pages", type=int, default=30)
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    import static_web

    with tempfile.TemporaryDirectory(prefix="courtier-outputs-") as tmp:
        port = 8080
        www = Path(tmp) / "www"
        static_web.generate(www, args.hosts, args.pages, port, 1, 30_000, 50)
        pages = len(list(www.glob("*/p/*.html")))
        before = run_child(args.before_src, www, port)
        after = run_child(HERE.parent / "src", www, port)
    print(f"{pages} pages; output digests, before / this tree:")
    for key in before:
        mark = "same" if before[key] == after[key] else "DIFFERENT"
        print(f"  {key:8s} {before[key][:16]}  {after[key][:16]}  {mark}")
    sys.exit(0 if before == after else 1)


if __name__ == "__main__":
    main()
