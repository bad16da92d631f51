-- The redirects that led to a URL when it was first discovered (issue 12): a JSON
-- list of {"url", "status"}, oldest first, capped (events/redirects.py); NULL for a
-- URL reached directly. It travels to the frontier with the row and into the events
-- of the URL's fetches.
ALTER TABLE urls ADD COLUMN redirect_chain TEXT;
