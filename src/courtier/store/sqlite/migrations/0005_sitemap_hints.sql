-- courtier SQLite schema, migration 5: the sitemap's lastmod/changefreq of a URL, the
-- prior of its recrawl interval while its own change history is short.
ALTER TABLE urls ADD COLUMN sitemap_changefreq TEXT;
ALTER TABLE urls ADD COLUMN sitemap_lastmod REAL;
