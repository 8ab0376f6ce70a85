-- counterd_instances records, per daemon instance, the sequence number of
-- the last flush round it committed. Rounds of one instance commit in
-- order, so this one row is the whole identity record: a round whose
-- sequence number is not above it was already applied. One row per
-- instance keeps the table small; rollup prunes instances idle for long.
CREATE TABLE counterd_instances (
    instance   text        PRIMARY KEY,
    last_seq   bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- counterd_apply writes one round exactly once: it advances the instance's
-- last_seq and writes the slotted increments in the same transaction, or,
-- when the round was already applied (a retry after a lost commit
-- acknowledgement, or a journal replayed after a crash), writes nothing and
-- says so. A null instance writes without identity.
CREATE FUNCTION counterd_apply(
    p_instance text,
    p_seq      bigint,
    p_keys     text[],
    p_deltas   bigint[],
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
    FROM counterd_add(p_keys, p_deltas, p_slots) AS a;
END
$$;
