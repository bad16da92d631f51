"""The peer crawler of the benchmark: a minimal Scrapy spider with polite settings.

Runs only inside ``bench/.peer-venv`` (created by ``bench/crawl_vs_scrapy.py``
with ``pip install scrapy``), never in the project's own venv.
"""
