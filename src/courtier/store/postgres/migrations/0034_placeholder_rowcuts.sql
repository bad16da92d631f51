-- Placeholder (branch rowcuts): number 34 belongs to the lease-renewal branch, which is
-- merged separately; this file only keeps the numbers gapless on this branch. Delete it
-- when merging (the other branch's 0034 replaces it).
SELECT 1;
