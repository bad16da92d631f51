"""Politeness judged from a real server log: robots.txt statuses, back-off, delays, per-IP cap."""
