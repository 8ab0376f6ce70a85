DROP FUNCTION counterd_apply(text[], bigint, text[], bigint[], double precision[], smallint[], smallint[]);

-- counterd_apply is as in 004.
CREATE FUNCTION counterd_apply(
    p_instance text,
    p_seq      bigint,
    p_keys     text[],
    p_deltas   bigint[],
    p_vars     double precision[],
    p_slots    smallint[],
    OUT updated   integer,
    OUT inserted  integer,
    OUT duplicate boolean
) LANGUAGE plpgsql AS $$
BEGIN
    duplicate := false;
    updated := 0;
    inserted := 0;
    IF p_instance IS NOT NULL THEN
        INSERT INTO counterd_instances AS ci (instance, last_seq, updated_at)
        VALUES (p_instance, p_seq, now())
        ON CONFLICT (instance) DO UPDATE
        SET last_seq = excluded.last_seq, updated_at = excluded.updated_at
        WHERE ci.last_seq < excluded.last_seq;
        IF NOT FOUND THEN
            duplicate := true;
            RETURN;
        END IF;
    END IF;

    WITH written AS (
        INSERT INTO counter_slots AS cs (key, slot, count, variance)
        SELECT b.key, coalesce(f.slot, b.fallback), b.n, b.v
        FROM unnest(p_keys, p_deltas, p_vars, p_slots) AS b(key, n, v, fallback)
        LEFT JOIN LATERAL (
            SELECT s.slot FROM counter_slots s
            WHERE s.key = b.key
            ORDER BY s.slot
            LIMIT 1
            FOR UPDATE SKIP LOCKED
        ) AS f ON true
        ON CONFLICT (key, slot) DO UPDATE
        SET count = cs.count + excluded.count, variance = cs.variance + excluded.variance
        RETURNING cs.xmax = 0 AS created
    )
    SELECT count(*) FILTER (WHERE NOT created), count(*) FILTER (WHERE created)
    INTO updated, inserted
    FROM written;
END
$$;
