-- Back to bigint counts and the PL/pgSQL write of 005. This fails if any
-- stored count is beyond int64 (counter_overflows lists them).
DROP VIEW counter_overflows;
DROP INDEX counters_beyond_int64;
DROP VIEW counter_estimates;
DROP VIEW counter_totals;

ALTER TABLE counters ALTER COLUMN total TYPE bigint;
ALTER TABLE counter_slots ALTER COLUMN count TYPE bigint;

CREATE VIEW counter_totals AS
SELECT key, sum(n)::bigint AS total
FROM (
    SELECT key, total AS n FROM counters
    UNION ALL
    SELECT key, count AS n FROM counter_slots
) AS parts
GROUP BY key;

CREATE VIEW counter_estimates AS
SELECT key,
       sum(n)::bigint                       AS total,
       sum(v) = 0                           AS exact,
       sum(v)                               AS variance,
       ceil(1.96 * sqrt(sum(v)))::bigint    AS error95
FROM (
    SELECT key, total AS n, variance AS v FROM counters
    UNION ALL
    SELECT key, count AS n, variance AS v FROM counter_slots
) AS parts
GROUP BY key;

-- counterd_apply is as in 005.
CREATE FUNCTION counterd_apply(
    p_lanes    text[],
    p_seq      bigint,
    p_keys     text[],
    p_deltas   bigint[],
    p_vars     double precision[],
    p_slots    smallint[],
    p_key_lane smallint[],
    OUT updated   integer,
    OUT inserted  integer,
    OUT done_lanes integer
) LANGUAGE plpgsql
-- PL/pgSQL caches a generic plan per session. Planned while counter_slots
-- was small (a new deployment, just analyzed), the lateral pick became a
-- sequential scan per key, and stayed one as the table grew: a round of
-- 2,000 keys over 100,000 rows took 32 s instead of 40 ms. A custom plan
-- per round costs well under a millisecond and sees the table's size now.
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    fresh boolean[];
BEGIN
    updated := 0;
    inserted := 0;
    done_lanes := 0;
    -- fresh[i] says lane p_lanes[i] had not seen p_seq: its keys are
    -- written. A null p_lanes writes every key without identity.
    IF p_lanes IS NOT NULL THEN
        WITH advanced AS (
            INSERT INTO counterd_instances AS ci (instance, last_seq, updated_at)
            SELECT l, p_seq, now() FROM unnest(p_lanes) AS l ORDER BY l
            ON CONFLICT (instance) DO UPDATE
            SET last_seq = excluded.last_seq, updated_at = excluded.updated_at
            WHERE ci.last_seq < excluded.last_seq
            RETURNING ci.instance
        )
        SELECT array_agg(l.name IN (SELECT instance FROM advanced) ORDER BY l.ord)
        INTO fresh
        FROM unnest(p_lanes) WITH ORDINALITY AS l(name, ord);
        done_lanes := cardinality(array_positions(fresh, false));
        IF done_lanes = cardinality(p_lanes) THEN
            RETURN;
        END IF;
    END IF;

    WITH written AS (
        INSERT INTO counter_slots AS cs (key, slot, count, variance)
        SELECT b.key, coalesce(f.slot, b.fallback), b.n, b.v
        FROM unnest(p_keys, p_deltas, p_vars, p_slots, p_key_lane) AS b(key, n, v, fallback, lane)
        LEFT JOIN LATERAL (
            SELECT s.slot FROM counter_slots s
            WHERE s.key = b.key
            ORDER BY s.slot
            LIMIT 1
            FOR UPDATE SKIP LOCKED
        ) AS f ON true
        WHERE fresh IS NULL OR fresh[b.lane]
        ON CONFLICT (key, slot) DO UPDATE
        SET count = cs.count + excluded.count, variance = cs.variance + excluded.variance
        RETURNING cs.xmax = 0 AS created
    )
    SELECT count(*) FILTER (WHERE NOT created), count(*) FILTER (WHERE created)
    INTO updated, inserted
    FROM written;
END
$$;
