-- 017_unique_sketch_write: a round writes each key's members as one
-- sketch the daemon built (internal/hll, byte for byte what hll_add_agg
-- makes of the same hashes), so PostgreSQL unions one sketch per key and
-- slot instead of aggregating every member. counter_uniques_write stays
-- for a daemon of the previous version still running.
--
-- The extension's schema goes on this migration's search_path, as in 014,
-- and the function keeps that path (SET search_path FROM CURRENT).
DO $$
DECLARE
    ext_schema text;
BEGIN
    SELECT n.nspname INTO ext_schema
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'hll';
    IF ext_schema IS NULL THEN
        RAISE EXCEPTION 'the hll extension is missing (migration 014 creates it)';
    END IF;
    PERFORM set_config('search_path', current_setting('search_path') || ', ' || quote_ident(ext_schema), true);
END
$$;

-- counter_uniques_write_sketches unions sketches[i], in the hll storage
-- format with counterd's settings hll(14,5,-1,1), into the slot row
-- slots[i] of keys[i] (sorted, each key and slot once). A round calls it
-- once, in its transaction, after its lanes moved: exactly once per lane.
-- Keys are taken in order, so two writers never wait on each other's rows
-- in a cycle.
CREATE FUNCTION counter_uniques_write_sketches(keys text[], slots smallint[], sketches bytea[]) RETURNS integer
LANGUAGE sql SET search_path FROM CURRENT AS $$
    WITH written AS (
        INSERT INTO counter_unique_slots AS u (key, slot, sketch)
        SELECT b.key, b.slot, b.sketch::hll
        FROM unnest(keys, slots, sketches) AS b(key, slot, sketch)
        ORDER BY b.key
        ON CONFLICT (key, slot) DO UPDATE SET sketch = hll_union(u.sketch, excluded.sketch)
        RETURNING 1
    )
    SELECT count(*)::integer FROM written
$$;
