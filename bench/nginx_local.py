"""A throw-away nginx instance on loopback that serves the benchmark web.

:class:`LocalNginx` renders ``bench/nginx.conf.template`` into a temporary
prefix (config, pid file, error log, temp dirs all inside it), runs nginx in
the foreground (``daemon off``) as a child process, waits until the port
accepts connections, and stops it with SIGQUIT (graceful: the buffered access
log is flushed) when the ``with`` block ends. It listens on 127.0.0.1 only.

:func:`ensure_nginx` finds the nginx binary, installing Debian's
``nginx-light`` (or ``nginx``) with apt-get when it is missing and we are root.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

TEMPLATE = Path(__file__).with_name("nginx.conf.template")
_TEMP_MODULES = {
    "client_body": None,  # core: always present
    "proxy": "http_proxy_module",
    "fastcgi": "http_fastcgi_module",
    "uwsgi": "http_uwsgi_module",
    "scgi": "http_scgi_module",
}


#: the pace of the realistic web's non-HTML files (``limit_rate``; nginx lets the first
#: second's worth go at once): what a crawler that stops reading can be sent
FILE_RATE = "32k"


class NginxError(RuntimeError):
    """nginx could not be found, installed, started or stopped."""


def ensure_nginx() -> str:
    """Path of the nginx binary; apt-get installs it first when it is missing."""
    for cand in (shutil.which("nginx"), "/usr/sbin/nginx"):
        if cand and os.access(cand, os.X_OK):
            return cand
    if os.geteuid() != 0:
        raise NginxError("nginx is not installed; run: sudo apt-get install -y nginx-light")
    subprocess.run(["apt-get", "update", "-qq"], check=False, timeout=300)
    for pkg in ("nginx-light", "nginx"):
        done = subprocess.run(
            ["apt-get", "install", "-y", "-qq", pkg],
            check=False,
            timeout=600,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
        if done.returncode == 0 and Path("/usr/sbin/nginx").exists():
            return "/usr/sbin/nginx"
    raise NginxError("apt-get could not install nginx-light or nginx")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _user_line() -> str:
    """``user`` directive: only meaningful (and needed) when the master runs as root."""
    if os.geteuid() != 0:
        return "# not root: workers run as the current user"
    nobody = pwd.getpwnam("nobody")
    group = grp.getgrgid(nobody.pw_gid).gr_name
    return f"user nobody {group};"


@dataclass(frozen=True)
class TlsFiles:
    """PEM files nginx serves HTTPS with: the certificate chain and its private key."""

    cert_chain: Path
    key: Path


def render_config(
    binary: str, prefix: Path, web_root: Path, port: int, access_log: Path, workers: int = 1,
    tls: TlsFiles | None = None,
) -> str:
    """The nginx.conf text for this instance (template with placeholders filled);
    with ``tls``, every server listens with TLS on the same port."""
    build = subprocess.run([binary, "-V"], capture_output=True, text=True, check=False).stderr
    temp_lines = []
    for name, module in _TEMP_MODULES.items():
        if module is None or f"--without-{module}" not in build:
            temp_lines.append(f"    {name}_temp_path {prefix}/{name};")
    values = {
        "USER_LINE": _user_line(),
        "WORKERS": str(workers),
        "PREFIX": str(prefix),
        "ACCESS_LOG": str(access_log),
        "TEMP_PATHS": "\n".join(temp_lines),
        "PORT": str(port),
        "DOMAIN": "bench.test",
        "FILE_RATE": FILE_RATE,
        "WEB_ROOT": str(web_root),
        # the placeholder ends a comment line: its value's first line stays in the comment
        "TLS": "off" if tls is None else "\n".join([
            "on",
            f"    ssl_certificate {tls.cert_chain};",
            f"    ssl_certificate_key {tls.key};",
            "    ssl_protocols TLSv1.2 TLSv1.3;",
            "    ssl_session_cache shared:bench:10m;",
        ]),
    }
    text = TEMPLATE.read_text(encoding="utf-8")
    for key, val in values.items():
        text = text.replace(f"@{key}@", val)
    if tls is not None:
        text = text.replace(f"listen 127.0.0.1:{port}", f"listen 127.0.0.1:{port} ssl")
    return text


def _make_world_readable(path: Path) -> None:
    """Let nginx workers (user nobody) traverse every parent directory of ``path``."""
    for p in [path, *path.parents]:
        if str(p) in ("/", "/tmp"):
            break
        mode = p.stat().st_mode
        if mode & 0o005 != 0o005:
            p.chmod(mode | 0o005)


class LocalNginx:
    """nginx serving ``web_root/<host>`` on ``127.0.0.1:port`` for one ``with`` block."""

    def __init__(
        self,
        web_root: Path,
        prefix: Path,
        port: int,
        access_log: Path,
        workers: int = 1,
        binary: str | None = None,
        tls: TlsFiles | None = None,
    ) -> None:
        self.web_root = web_root.resolve()
        self.prefix = prefix.resolve()
        self.port = port
        self.access_log = access_log.resolve()
        self.workers = workers
        self.binary = binary or ensure_nginx()
        self.tls = tls
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 10.0) -> None:
        """Write the config, start nginx and wait until the port accepts connections."""
        self.prefix.mkdir(parents=True, exist_ok=True)
        conf = self.prefix / "nginx.conf"
        conf.write_text(
            render_config(
                self.binary,
                self.prefix,
                self.web_root,
                self.port,
                self.access_log,
                self.workers,
                self.tls,
            ),
            encoding="utf-8",
        )
        if os.geteuid() == 0:
            _make_world_readable(self.web_root)
        err = self.prefix / "error.log"
        cmd = [self.binary, "-p", str(self.prefix), "-c", str(conf), "-e", str(err)]
        with open(self.prefix / "stderr.log", "wb") as stderr:
            self.proc = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise NginxError(f"nginx exited at start: {self._tail_errors()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise NginxError(f"nginx did not listen on port {self.port}: {self._tail_errors()}")

    def _tail_errors(self) -> str:
        parts = []
        for name in ("error.log", "stderr.log"):
            p = self.prefix / name
            if p.exists():
                parts.append(p.read_text(errors="replace")[-2000:])
        return " | ".join(x.strip() for x in parts if x.strip())

    def stop(self, timeout: float = 10.0) -> None:
        """Graceful stop (SIGQUIT flushes the access log); SIGKILL after ``timeout``."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGQUIT)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # master and its workers: our own group
            proc.wait(timeout=5)

    def __enter__(self) -> LocalNginx:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
