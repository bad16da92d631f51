-- Placeholder (branch citlease): number 38 belongs to another branch, merged separately;
-- this file only keeps the numbers gapless on this branch. Delete it when merging (the
-- other branch's 0038 replaces it).
SELECT 1;
