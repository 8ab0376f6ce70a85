-- Placeholder: migration 014 belongs to the uniques kind (PFADD), on its own
-- branch. This file only keeps 1..n without a gap on this branch; drop it
-- when that branch's 014 is merged.
SELECT 1;
