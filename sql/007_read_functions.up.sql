-- Reads that scale with what they ask for, not with the number of keys.
--
-- counter_totals and counter_estimates group base plus slot rows by key
-- over both whole tables. A filter on the key column itself (key = $1,
-- key = ANY($1)) is pushed below the GROUP BY and becomes index lookups,
-- but a join cannot be: joining 50 posts to counter_totals aggregated all
-- 200,000 keys (469 ms), and ORDER BY total DESC LIMIT 10 did the same
-- (426 ms). A view of another shape does not help: PostgreSQL pushes a
-- join clause into a UNION ALL view only when every branch is a single
-- table with no WHERE, and the keys that have slot rows but no base row
-- cannot be listed that way. So joins go through the functions below.

-- counter_totals(keys) is counter_totals for a list of keys: one row per
-- element of keys, each an index lookup in counters and in counter_slots.
-- It is a single SELECT in LANGUAGE sql, STABLE and not STRICT, so the
-- planner inlines it into the calling query (a lateral call per row of a
-- join becomes a nested loop of index lookups).
CREATE FUNCTION counter_totals(keys text[])
RETURNS TABLE (key text, total bigint)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
SELECT k.key,
       CASE WHEN e.n BETWEEN -9223372036854775808 AND 9223372036854775807
            THEN e.n::bigint END
FROM unnest(keys) AS k(key)
CROSS JOIN LATERAL (
    SELECT coalesce(sum(p.n), 0) AS n FROM (
        SELECT c.total AS n FROM counters c WHERE c.key = k.key
        UNION ALL
        SELECT s.count FROM counter_slots s WHERE s.key = k.key
    ) AS p
) AS e
$$;

-- counter_estimates(keys) is counter_estimates for a list of keys, planned
-- as counter_totals(keys) is.
CREATE FUNCTION counter_estimates(keys text[])
RETURNS TABLE (key text, total bigint, exact boolean, variance double precision, error95 bigint)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
SELECT k.key,
       CASE WHEN e.n BETWEEN -9223372036854775808 AND 9223372036854775807
            THEN e.n::bigint END,
       e.v = 0,
       e.v,
       ceil(1.96 * sqrt(e.v))::bigint
FROM unnest(keys) AS k(key)
CROSS JOIN LATERAL (
    SELECT coalesce(sum(p.n), 0) AS n, coalesce(sum(p.v), 0)::double precision AS v FROM (
        SELECT c.total AS n, c.variance AS v FROM counters c WHERE c.key = k.key
        UNION ALL
        SELECT s.count, s.variance FROM counter_slots s WHERE s.key = k.key
    ) AS p
) AS e
$$;

-- counters_by_total lets counter_top read base totals from the largest
-- down and stop after n. It includes key so ties come out in key order
-- from the index alone. Indexing total makes a rollup's update of a base
-- row a non-HOT update (new entries in every index of counters); the
-- rollup touches only keys that had slot rows, once a minute.
CREATE INDEX counters_by_total ON counters (total DESC, key);

-- counters_by_key_prefix serves counter_top's prefix filter
-- (starts_with) under any collation; the primary key does only under C.
-- Being an index on key, it also answers key = lookups as well as the
-- primary key does, and the planner may use either.
CREATE INDEX counters_by_key_prefix ON counters (key text_pattern_ops);

-- counter_top(n, prefix) is the n largest totals, exactly, without
-- aggregating every key. A key with no slot rows has total = base total,
-- so if it is among the top n overall it is among the top n base totals
-- of keys with no slot rows. The candidates are therefore every key with
-- slot rows (counter_slots is small: the rollup empties it every minute)
-- plus the first n such base rows in counters_by_total order. Ranking is
-- by the exact total, ties by key; a total beyond int64 ranks where it
-- belongs and shows as NULL, as in counter_totals.
CREATE FUNCTION counter_top(n integer, prefix text DEFAULT NULL)
RETURNS TABLE (key text, total bigint)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
SELECT t.key,
       CASE WHEN t.amount BETWEEN -9223372036854775808 AND 9223372036854775807
            THEN t.amount::bigint END
FROM (
    SELECT s.key,
           sum(s.count) + coalesce((SELECT c.total FROM counters c WHERE c.key = s.key), 0) AS amount
    FROM counter_slots s
    WHERE counter_top.prefix IS NULL OR starts_with(s.key, counter_top.prefix)
    GROUP BY s.key
    UNION ALL
    (SELECT c.key, c.total
     FROM counters c
     WHERE (counter_top.prefix IS NULL OR starts_with(c.key, counter_top.prefix))
       AND NOT EXISTS (SELECT FROM counter_slots s WHERE s.key = c.key)
     ORDER BY c.total DESC, c.key
     LIMIT counter_top.n)
) AS t
ORDER BY t.amount DESC, t.key
LIMIT counter_top.n
$$;

COMMENT ON VIEW counter_totals IS
    'Public read interface: each counted key''s total (rolled-up base plus slot rows), read in one statement. Filter on key (= or = ANY) for index lookups; to join, use counter_totals(text[]).';
COMMENT ON COLUMN counter_totals.key IS 'The counter''s key.';
COMMENT ON COLUMN counter_totals.total IS 'Base plus slot rows; NULL when beyond int64 (see counter_overflows).';

COMMENT ON VIEW counter_estimates IS
    'counter_totals with how exact each total is: the true count lies within total +/- error95 with about 95% probability. To join, use counter_estimates(text[]).';
COMMENT ON COLUMN counter_estimates.key IS 'The counter''s key.';
COMMENT ON COLUMN counter_estimates.total IS 'Base plus slot rows; NULL when beyond int64 (see counter_overflows).';
COMMENT ON COLUMN counter_estimates.exact IS 'True when no sampled increment went into the total.';
COMMENT ON COLUMN counter_estimates.variance IS 'Variance of the sampled increments in the total (0 when exact).';
COMMENT ON COLUMN counter_estimates.error95 IS 'Half-width of the 95% interval around total: ceil(1.96 * sqrt(variance)).';

COMMENT ON VIEW counter_overflows IS
    'Keys whose rolled-up total is beyond int64, with the exact total (as of the last rollup pass).';
COMMENT ON COLUMN counter_overflows.key IS 'The counter''s key.';
COMMENT ON COLUMN counter_overflows.total IS 'The exact rolled-up total (numeric).';

COMMENT ON FUNCTION counter_totals(text[]) IS
    'counter_totals for the given keys, one row (key, total) per array element in no particular order, each an index lookup; use it to join: CROSS JOIN LATERAL counter_totals(ARRAY[''post:'' || p.id]). A key never counted has total 0; total is NULL beyond int64.';
COMMENT ON FUNCTION counter_estimates(text[]) IS
    'counter_estimates for the given keys, one row (key, total, exact, variance, error95) per array element in no particular order, each an index lookup. A key never counted has total 0 and is exact; total is NULL beyond int64.';
COMMENT ON FUNCTION counter_top(integer, text) IS
    'The n keys with the largest totals (among keys starting with prefix, if not NULL), largest first, ties by key: exact, and an index scan of about n rows plus the slot rows. Ranked by exact total; total is NULL beyond int64. n NULL means every key.';
