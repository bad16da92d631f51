"""RFC 9309's rule for an unreachable robots.txt, given to Scrapy for the benchmark.

Scrapy's ``RobotsTxtMiddleware`` parses the body of the robots.txt response
whatever its status, so a 500 error page reads as "allow everything". RFC 9309
§2.3.1.4 asks a crawler to assume complete disallow when robots.txt answers
5xx, which courtier does; this downloader middleware makes Scrapy do the same by
turning a 5xx robots.txt response into ``Disallow: /`` before it is parsed, so
both crawlers are held to the same rules on the realistic web's robots-500 hosts.
"""

from __future__ import annotations

from typing import Any

from scrapy.http import Request, Response

DISALLOW_ALL = b"User-agent: *\nDisallow: /\n"


class UnreachableRobotsMiddleware:
    """A 5xx answer to ``/robots.txt`` becomes a robots.txt that disallows everything."""

    def process_response(self, request: Request, response: Response, spider: Any = None
                         ) -> Response:
        """Replace the body of a 5xx robots.txt response; pass everything else."""
        if response.status >= 500 and request.url.endswith("/robots.txt"):
            return response.replace(status=200, body=DISALLOW_ALL)
        return response
