DROP FUNCTION counterd_apply(text, bigint, text[], bigint[], double precision[], smallint[]);

-- counterd_add and counterd_apply are as in 003.
CREATE FUNCTION counterd_add(
    p_keys   text[],
    p_deltas bigint[],
    p_vars   double precision[],
    p_slots  smallint[],
    OUT picked   integer,
    OUT upserted integer
) LANGUAGE plpgsql AS $$
DECLARE
    i integer;
    s smallint;
BEGIN
    picked := 0;
    upserted := 0;
    FOR i IN 1 .. coalesce(array_length(p_keys, 1), 0) LOOP
        SELECT cs.slot INTO s
        FROM counter_slots cs
        WHERE cs.key = p_keys[i]
        ORDER BY cs.slot
        LIMIT 1
        FOR UPDATE SKIP LOCKED;
        IF FOUND THEN
            UPDATE counter_slots
            SET count = count + p_deltas[i], variance = variance + p_vars[i]
            WHERE key = p_keys[i] AND slot = s;
            picked := picked + 1;
        ELSE
            INSERT INTO counter_slots AS cs (key, slot, count, variance)
            VALUES (p_keys[i], p_slots[i], p_deltas[i], p_vars[i])
            ON CONFLICT (key, slot) DO UPDATE
            SET count = cs.count + excluded.count, variance = cs.variance + excluded.variance;
            upserted := upserted + 1;
        END IF;
    END LOOP;
END
$$;

CREATE FUNCTION counterd_apply(
    p_instance text,
    p_seq      bigint,
    p_keys     text[],
    p_deltas   bigint[],
    p_vars     double precision[],
    p_slots    smallint[],
    OUT picked    integer,
    OUT upserted  integer,
    OUT duplicate boolean
) LANGUAGE plpgsql AS $$
BEGIN
    duplicate := false;
    picked := 0;
    upserted := 0;
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
    SELECT a.picked, a.upserted INTO picked, upserted
    FROM counterd_add(p_keys, p_deltas, p_vars, p_slots) AS a;
END
$$;
