"""Crawler-trap defences against a modelled trap web (pure) and the same web on loopback."""
