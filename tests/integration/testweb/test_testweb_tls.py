"""The test web over HTTPS as an observer: completed TLS handshakes counted by the name
the client sent, and the plain-HTTP side with its redirect flavours, every request
logged with its scheme."""

from __future__ import annotations

import ssl

import aiohttp
import pytest

from courtier.core.errors import ConfigError
from courtier.testweb import HostSpec, TestWebServer, WebSpec
from courtier.testweb.tls import TestCA

SPEC = WebSpec(hosts=[HostSpec("twin.web.test", pages=3, http_redirect="twin"),
                      HostSpec("pages.web.test", pages=3, http_redirect="twin_pages"),
                      HostSpec("home.web.test", pages=3, http_redirect="home"),
                      HostSpec("plain.web.test", pages=3)])


def client_context(ca: TestCA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.load_verify_locations(cadata=ca.pem.decode())
    return context


async def get(session: aiohttp.ClientSession, url: str, host: str,
              context: ssl.SSLContext | None = None) -> tuple[int, str | None]:
    """GET ``url`` (an address on 127.0.0.1) as ``host``: (status, Location)."""
    async with session.get(url, headers={"Host": host}, allow_redirects=False,
                           ssl=context if context is not None else False,
                           server_hostname=host if context is not None else None) as resp:
        await resp.read()
        return resp.status, resp.headers.get("Location")


async def test_handshakes_are_counted_per_name_once_per_connection() -> None:
    """Two requests over one kept-alive connection are one handshake; a new connection
    is another; each is counted under the name the client sent. Seen red with the count
    taken per request (in the handler): 3 for twin.web.test."""
    ca = TestCA()
    context = ca.server_context([h.name for h in SPEC.hosts])
    async with TestWebServer(SPEC, ssl_context=context) as server:
        base = f"https://127.0.0.1:{server.port}"
        trust = client_context(ca)
        async with aiohttp.ClientSession() as session:
            assert (await get(session, base + "/", "twin.web.test", trust))[0] == 200
            assert (await get(session, base + "/p/0.html", "twin.web.test", trust))[0] == 200
        async with aiohttp.ClientSession() as session:
            assert (await get(session, base + "/", "twin.web.test", trust))[0] == 200
            assert (await get(session, base + "/", "home.web.test", trust))[0] == 200
        log = list(server.log)
    assert server.tls_handshakes == {"twin.web.test": 2, "home.web.test": 1}
    assert sum(server.tls_resumed.values()) == 0
    assert {r.scheme for r in log} == {"https"}


async def test_the_plain_side_answers_as_each_host_says() -> None:
    ca = TestCA()
    context = ca.server_context([h.name for h in SPEC.hosts])
    async with TestWebServer(SPEC, ssl_context=context, plain_http=True) as server:
        assert server.http_port is not None and server.http_port != server.port
        plain = f"http://127.0.0.1:{server.http_port}"
        web = server.web
        async with aiohttp.ClientSession() as session:
            answers = {
                (host, path): await get(session, plain + path, host)
                for host in ("twin.web.test", "pages.web.test", "home.web.test",
                             "plain.web.test")
                for path in ("/robots.txt", "/p/1.html?x=1")
            }
            index = await get(session, f"https://127.0.0.1:{server.port}/", "twin.web.test",
                              client_context(ca))
        log = list(server.log)
    assert answers[("twin.web.test", "/robots.txt")] \
        == (301, web.url("twin.web.test", "/robots.txt"))
    assert answers[("twin.web.test", "/p/1.html?x=1")] \
        == (301, web.url("twin.web.test", "/p/1.html?x=1"))
    assert answers[("pages.web.test", "/robots.txt")] == (404, None)
    assert answers[("pages.web.test", "/p/1.html?x=1")] \
        == (301, web.url("pages.web.test", "/p/1.html?x=1"))
    assert answers[("home.web.test", "/p/1.html?x=1")] == (301, web.url("home.web.test", "/"))
    assert answers[("plain.web.test", "/p/1.html?x=1")] == (404, None)
    assert index[0] == 200
    assert [r.scheme for r in log] == ["http"] * 8 + ["https"]
    model = web.html_model("twin.web.test", "/")
    assert model is not None
    linked = {link.target for link in model.links}
    assert {web.http_url("twin.web.test", f"/p/{i}.html") for i in range(3)} <= linked
    plain_model = web.html_model("plain.web.test", "/")
    assert plain_model is not None
    assert not any(link.target.startswith("http://") for link in plain_model.links)


def test_a_plain_side_needs_an_https_web_and_a_known_flavour() -> None:
    with pytest.raises(ConfigError, match="plain_http"):
        TestWebServer(SPEC, plain_http=True)
    with pytest.raises(ConfigError, match="http_redirect"):
        HostSpec("x.web.test", http_redirect="sideways")  # type: ignore[arg-type]
