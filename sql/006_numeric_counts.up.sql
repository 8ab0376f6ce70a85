-- Counts are stored as numeric, so no write, fold or sum can overflow.
--
-- Before this, a key whose stored total passed int64 (INCRBY k
-- 9223372036854775807, then INCR k) made PostgreSQL reject the whole round
-- with "bigint out of range"; the daemon retried that round forever, so no
-- other key committed either, and a sum past int64 broke counter_totals
-- for every reader and stopped the rollup at that key. With numeric
-- storage a key's total is always exact; only handing it to a reader as
-- an int64 can fail, and then only for that key (counter_totals shows
-- NULL, counterd's GET replies an error, counter_overflows lists it).
--
-- The write statement now lives in Go beside the code that runs it
-- (internal/slots/write.go), so the PL/pgSQL copy goes.
DROP FUNCTION counterd_apply(text[], bigint, text[], bigint[], double precision[], smallint[], smallint[]);

DROP VIEW counter_estimates;
DROP VIEW counter_totals;

ALTER TABLE counters ALTER COLUMN total TYPE numeric;
ALTER TABLE counter_slots ALTER COLUMN count TYPE numeric;

-- counter_totals is the public SQL read interface: base plus every slot,
-- in one statement, so a reader never sees a rollup pass half done. total
-- is NULL for a key whose total is beyond int64 (see counter_overflows).
CREATE VIEW counter_totals AS
SELECT key,
       CASE WHEN sum(n) BETWEEN -9223372036854775808 AND 9223372036854775807
            THEN sum(n)::bigint END AS total
FROM (
    SELECT key, total AS n FROM counters
    UNION ALL
    SELECT key, count AS n FROM counter_slots
) AS parts
GROUP BY key;

-- counter_estimates is counter_totals with how exact each total is: exact
-- when no sampled increment went into it, else an estimate whose true
-- value lies within total ± error95 with about 95% probability.
CREATE VIEW counter_estimates AS
SELECT key,
       CASE WHEN sum(n) BETWEEN -9223372036854775808 AND 9223372036854775807
            THEN sum(n)::bigint END         AS total,
       sum(v) = 0                           AS exact,
       sum(v)                               AS variance,
       ceil(1.96 * sqrt(sum(v)))::bigint    AS error95
FROM (
    SELECT key, total AS n, variance AS v FROM counters
    UNION ALL
    SELECT key, count AS n, variance AS v FROM counter_slots
) AS parts
GROUP BY key;

-- Rolled-up totals beyond int64 are rare; this partial index keeps
-- finding them an index scan of an (almost always) empty index.
CREATE INDEX counters_beyond_int64 ON counters (key)
WHERE total < -9223372036854775808 OR total > 9223372036854775807;

-- counter_overflows lists the keys whose rolled-up total is beyond int64,
-- with the exact total. A key whose slot rows alone take it past int64
-- shows here after the next rollup pass; counter_totals shows it as NULL
-- at once.
CREATE VIEW counter_overflows AS
SELECT key, total FROM counters
WHERE total < -9223372036854775808 OR total > 9223372036854775807;
