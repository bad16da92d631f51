"""Start-up of ``courtier crawl``: what the process has loaded when its first request
reaches the server.

A behaviour check, not a timing (the CPU figures are in bench/README.md, "Start-up"):
a fresh interpreter runs the CLI's ``main`` against a plain socket server in a thread of
the same process, which notes ``sys.modules`` the moment the first request's bytes
arrive. Nothing there may be what a crawl needs only later or only sometimes: numba
(loaded once the numpy path has cost as much as the load), numpy and the SimHash code
(imported in a thread from the first *page* request on), the admin API and aiohttp's
server side (only with ``--api``), fsspec (only for an archive that is not a local folder).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

#: loaded only after the first request, or never for this crawl
LATER = ("numba", "numpy", "courtier.dedup.simhash", "courtier.dedup.simhash_index",
         "courtier.api.server", "courtier.api.routes", "aiohttp.web", "fsspec")

_PROBE = r"""
import contextlib, io, json, socket, sys, threading
from courtier.cli.main import main

listener = socket.create_server(("127.0.0.1", 0))
port = listener.getsockname()[1]
first = []

def serve():
    while True:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            if not first:
                first.append(sorted(sys.modules))
            target = data.split(b" ", 2)[1]
            body = b"" if target == b"/robots.txt" else b"<html><body><p>one page</p></body></html>"
            status = b"404 Not Found" if target == b"/robots.txt" else b"200 OK"
            conn.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/html\r\n"
                         b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)

threading.Thread(target=serve, daemon=True).start()
hosts, data = sys.argv[1], sys.argv[2]
with open(hosts, "w") as f:
    f.write("127.0.0.1 first.test\n")
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["crawl", f"http://first.test:{port}/", "--resolve", hosts,
                 "--allow-network", "127.0.0.0/8", "--data", data, "--delay", "0",
                 "--linger", "0", "--progress", "none"])
print(json.dumps({"code": code, "out": out.getvalue(), "first": first[0] if first else None}))
"""


def test_the_first_request_leaves_numba_numpy_and_the_api_unloaded(tmp_path: Path) -> None:
    """Seen red with the crawl loading the compiled SimHash path before it starts
    (``await asyncio.to_thread(prepare_compiled)`` put back in ``app.crawl``): numba,
    numpy and the SimHash modules were loaded at the first request."""
    run = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path / "hosts.txt"),
                          str(tmp_path / "data")], capture_output=True, text=True,
                         timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.splitlines()[-1])
    assert result["code"] == 0 and "fetched 1 " in result["out"], result["out"]
    loaded = set(result["first"])
    assert "courtier.crawl.worker" in loaded  # the snapshot is the crawler's, mid-crawl
    assert sorted(m for m in LATER if m in loaded) == []
