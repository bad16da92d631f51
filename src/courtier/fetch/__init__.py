"""Fetching: the transport protocol, the aiohttp transport, DNS and the SSRF guard."""
