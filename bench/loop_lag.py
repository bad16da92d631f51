"""Loop lag while hostile documents are parsed off the loop (issue 14).

Prints, for each document, the parse time off the loop and the longest loop lag
seen by a 5 ms timer meanwhile, plus an idle baseline measured in the same run.
Run: .venv/bin/python bench/loop_lag.py
"""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import Awaitable

from courtier.crawl.loopwatch import LoopLagMonitor
from courtier.parse.offload import OffLoopParser

ATTRS = (b"<html><body><div " + b" ".join(b"a%d=1" % i for i in range(20_000))
         + b">x</div></body></html>")
DEEP = b"<html><body>" + b"<div>" * 15_000 + b"</body></html>"
SITEMAP = gzip.compress(b"<urlset><url><loc>http://a.test/1</loc></url>"
                        + b"<junk>j</junk>" * 300_000 + b"</urlset>", 6)


async def measure(name: str, work: Awaitable[object]) -> None:
    monitor = LoopLagMonitor(interval=0.005)
    monitor.start()
    await asyncio.sleep(0.05)
    began = time.perf_counter()
    await work
    took = time.perf_counter() - began
    await monitor.stop()
    print(f"{name}: {took:.2f} s, longest loop lag {monitor.longest * 1000:.0f} ms "
          f"({monitor.samples} samples)")


async def main() -> None:
    parser = OffLoopParser(timeout=600)
    try:
        await measure("20,000 attributes (child process)",
                      parser.html(ATTRS, "http://a.test/", None, None, "courtier"))
        await measure("15,000 nested divs (thread)",
                      parser.html(DEEP, "http://a.test/", None, None, "courtier"))
        await measure("gzip sitemap, 300k junk elements (child process)",
                      parser.sitemap(SITEMAP, "http://a.test/sitemap.xml.gz"))
        await measure("idle baseline", asyncio.sleep(1))
    finally:
        parser.close()


if __name__ == "__main__":
    asyncio.run(main())
