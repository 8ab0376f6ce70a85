-- counters holds the rolled-up base total of every key. Only the rollup
-- writes here, so it is never a hot row.
CREATE TABLE counters (
    key        text        PRIMARY KEY CHECK (octet_length(key) BETWEEN 1 AND 256),
    total      bigint      NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- counter_slots spreads one key's recent increments over several rows so
-- that concurrent writers do not queue on one row lock. count is not
-- indexed, so "count = count + d" is a HOT update when the page has room;
-- fillfactor 70 keeps that room on every page.
CREATE TABLE counter_slots (
    key   text     NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 256),
    slot  smallint NOT NULL CHECK (slot >= 0),
    count bigint   NOT NULL,
    PRIMARY KEY (key, slot)
) WITH (
    fillfactor = 70,
    -- Slot rows are updated constantly and deleted by every rollup pass:
    -- vacuum them well before the default 20% of dead rows.
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05
);

-- counter_totals is the public SQL read interface: base plus every slot, in
-- one statement, so a reader never sees a rollup pass half done. The sum is
-- numeric and cast back, so a total beyond int64 is an error, never a wrap.
CREATE VIEW counter_totals AS
SELECT key, sum(n)::bigint AS total
FROM (
    SELECT key, total AS n FROM counters
    UNION ALL
    SELECT key, count AS n FROM counter_slots
) AS parts
GROUP BY key;

-- counterd_add writes one batch of slotted increments. Keys must arrive
-- sorted and unique: each key is handled in turn, so a transaction only
-- ever waits for a row while holding rows of smaller keys, and writers
-- cannot form a lock cycle. For each key it adds to the first slot row no
-- other transaction holds (SKIP LOCKED never waits); when every slot row is
-- held, or the key has none, it upserts into the caller's random slot.
CREATE FUNCTION counterd_add(
    p_keys   text[],
    p_deltas bigint[],
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
            SET count = count + p_deltas[i]
            WHERE key = p_keys[i] AND slot = s;
            picked := picked + 1;
        ELSE
            INSERT INTO counter_slots AS cs (key, slot, count)
            VALUES (p_keys[i], p_slots[i], p_deltas[i])
            ON CONFLICT (key, slot) DO UPDATE SET count = cs.count + excluded.count;
            upserted := upserted + 1;
        END IF;
    END LOOP;
END
$$;
