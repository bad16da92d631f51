"""A local multi-host test web: deterministic pages, one loopback server, an access log.

Used by integration tests and ``courtier demo``::

    async with TestWebServer(default_web()) as server:
        seeds = server.web.seeds()
        expected = server.web.expected_fetches()
        ...
        assert politeness_violations(server.log, delay=1.0, max_in_flight=1) == []
"""

from courtier.testweb.links import HtmlPage, Link
from courtier.testweb.responses import PageResponse, normalize_path
from courtier.testweb.server import (
    HeldResponse,
    RequestRecord,
    TestWebServer,
    max_overlap,
    politeness_violations,
    serve_testweb,
)
from courtier.testweb.site import TestWeb
from courtier.testweb.spec import (
    ALL_ROBOTS_KINDS,
    MORE_ROBOTS_KINDS,
    ROBOTS_KINDS,
    HostSpec,
    RobotsKind,
    WebSpec,
    default_web,
    host_name,
    render_retry_after,
)

__all__ = [
    "ALL_ROBOTS_KINDS",
    "MORE_ROBOTS_KINDS",
    "ROBOTS_KINDS",
    "HeldResponse",
    "HostSpec",
    "HtmlPage",
    "Link",
    "PageResponse",
    "RequestRecord",
    "RobotsKind",
    "TestWeb",
    "TestWebServer",
    "WebSpec",
    "default_web",
    "host_name",
    "max_overlap",
    "normalize_path",
    "politeness_violations",
    "render_retry_after",
    "serve_testweb",
]
