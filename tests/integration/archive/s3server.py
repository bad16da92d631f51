"""A real S3-compatible server on loopback for the tests: moto's standalone server.

:func:`s3_server` starts ``python -m moto.server -H 127.0.0.1 -p PORT`` in a
subprocess (not a mock of the client: the S3 client speaks HTTP to it) and
sets the standard AWS environment variables so that the crawler, s3fs and
child processes find it. Without moto the tests skip, except when
CI (tests/ci.py): then they fail.
"""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.ci import required_under_ci


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def s3_server(monkeypatch: pytest.MonkeyPatch, bucket: str = "crawl") -> Iterator[str]:
    """Yield the endpoint URL of a fresh server holding an empty ``bucket``."""
    missing = [m for m in ("moto", "s3fs", "flask") if importlib.util.find_spec(m) is None]
    if missing:
        required_under_ci(f"S3 test server needs {missing} (pip install -e '.[dev]')")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # bounded: the server is up when it accepts a connection
            if proc.poll() is not None:
                pytest.fail(f"moto server exited with {proc.returncode}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            time.sleep(0.05)
        for name, value in (("AWS_ENDPOINT_URL", endpoint), ("AWS_ACCESS_KEY_ID", "testing"),
                            ("AWS_SECRET_ACCESS_KEY", "testing"),
                            ("AWS_DEFAULT_REGION", "us-east-1"),
                            ("AWS_EC2_METADATA_DISABLED", "true")):
            monkeypatch.setenv(name, value)
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()
        s3fs.S3FileSystem(endpoint_url=endpoint).mkdir(bucket)
        yield endpoint
    finally:
        proc.kill()
        proc.wait()
