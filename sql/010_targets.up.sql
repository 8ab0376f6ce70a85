-- counter_unfolded(keys) is, for each key, the sum of its slot rows: what
-- the rollup has not folded yet. With ROLLUP_TARGETS, an app column such
-- as posts.like_count holds everything folded so far, so the column plus
-- counter_unfolded of its key is the exact count, read in one snapshot
-- (a fold moves an amount from the slot rows to the column in one
-- transaction, so a reader sees it on one side or the other, never both).
--
-- Like counter_totals(keys), it is a single SELECT in LANGUAGE sql,
-- STABLE and not STRICT, so the planner inlines it: a lateral call per
-- row of a join is one index lookup in counter_slots. The sum stays
-- numeric, so it is exact and never NULL (0 for a key with no slot rows).
CREATE FUNCTION counter_unfolded(keys text[])
RETURNS TABLE (key text, unfolded numeric)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
SELECT k.key,
       (SELECT coalesce(sum(s.count), 0) FROM counter_slots s WHERE s.key = k.key)
FROM unnest(keys) AS k(key)
$$;

COMMENT ON FUNCTION counter_unfolded(text[]) IS
    'The amount of each key not yet folded by the rollup (the sum of its slot rows; 0 if none), one row (key, unfolded) per array element, each an index lookup. An app column fed by ROLLUP_TARGETS plus this is the exact count: posts.like_count + unfolded.';
