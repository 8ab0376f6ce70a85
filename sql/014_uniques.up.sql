-- 014_uniques: distinct members per key (PFADD, PFCOUNT) as postgresql-hll
-- sketches, hll(14,5,-1,1): 2^14 registers of 5 bits, explicit below the
-- automatic threshold, sparse on. Those are the settings internal/hll
-- builds, so a sketch made in SQL from the same values is identical.
--
-- The hll extension: used where it is installed, created if it is not.
-- Creating it needs a superuser (it is not a trusted extension), so a
-- role without the right fails here with what to run. It goes into schema
-- public when the database has one (an extension is one per database, and
-- in counterd's own schema it would go with that schema: a DROP SCHEMA
-- ... CASCADE would take every other schema's sketch columns along), else
-- into the first schema of search_path; wherever it is,
-- its schema is put on this migration's search_path, and every function
-- below runs with that path (SET search_path FROM CURRENT), so callers
-- need not have the extension's schema on their own path.
DO $$
DECLARE
    ext_schema text;
BEGIN
    SELECT n.nspname INTO ext_schema
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'hll';
    IF ext_schema IS NULL THEN
        BEGIN
            IF EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'public') THEN
                CREATE EXTENSION hll SCHEMA public;
            ELSE
                CREATE EXTENSION hll;
            END IF;
        EXCEPTION
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'counterd needs the hll extension for unique counts, and this role may not create it: run CREATE EXTENSION hll; as a superuser in this database (Debian/Ubuntu package postgresql-15-hll), then start counterd again'
                    USING ERRCODE = 'insufficient_privilege';
            WHEN undefined_file THEN
                RAISE EXCEPTION 'counterd needs the hll extension for unique counts, and this server does not have it: install postgresql-hll (Debian/Ubuntu package postgresql-15-hll) on the database server, then start counterd again'
                    USING ERRCODE = 'undefined_file';
            WHEN unique_violation OR duplicate_object THEN
                NULL; -- created concurrently by another migration
        END;
        SELECT n.nspname INTO ext_schema
        FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'hll';
    END IF;
    PERFORM set_config('search_path', current_setting('search_path') || ', ' || quote_ident(ext_schema), true);
END
$$;

-- counter_unique_slots holds the sketches rounds wrote, spread over slot
-- rows like counter_slots so that daemons writing one key do not queue on
-- one row. A round unions its sketch of a key into one slot row.
CREATE TABLE counter_unique_slots (
    key    text NOT NULL,
    slot   smallint NOT NULL,
    sketch hll NOT NULL,
    PRIMARY KEY (key, slot)
);

-- counter_unique_sketches holds each key's sketch as the rollup folded it:
-- the union of every slot row it took in.
CREATE TABLE counter_unique_sketches (
    key    text PRIMARY KEY,
    sketch hll NOT NULL
);

-- counter_uniques_write unions into each key's slot row the sketch of the
-- hashes given for it: keys[i] (sorted), its slot slots[i], the member
-- hash hashes[i]. A round calls it once, in its transaction, after its
-- lanes moved: exactly once per lane. Keys are taken in order, so two
-- writers never wait on each other's rows in a cycle.
CREATE FUNCTION counter_uniques_write(keys text[], slots smallint[], hashes bigint[]) RETURNS integer
LANGUAGE sql SET search_path FROM CURRENT AS $$
    WITH written AS (
        INSERT INTO counter_unique_slots AS u (key, slot, sketch)
        SELECT b.key, b.slot, hll_add_agg(b.h::hll_hashval, 14, 5, -1, 1)
        FROM unnest(keys, slots, hashes) AS b(key, slot, h)
        GROUP BY b.key, b.slot
        ORDER BY b.key
        ON CONFLICT (key, slot) DO UPDATE SET sketch = hll_union(u.sketch, excluded.sketch)
        RETURNING 1
    )
    SELECT count(*)::integer FROM written
$$;

-- counter_unique_sketch_text returns each key's stored sketch, folded and
-- not, as hll's text form (\x and hex of the storage format), NULL for a
-- key with none. The daemon reads it for PFCOUNT.
CREATE FUNCTION counter_unique_sketch_text(keys text[]) RETURNS TABLE (key text, sketch text)
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT k.key, (
        SELECT hll_union_agg(s.sketch)::text FROM (
            SELECT f.sketch FROM counter_unique_sketches f WHERE f.key = k.key
            UNION ALL
            SELECT u.sketch FROM counter_unique_slots u WHERE u.key = k.key
        ) AS s
    )
    FROM unnest(keys) AS k(key)
$$;

-- counter_uniques(keys) returns each key's estimated number of distinct
-- members, from everything committed (what the rollup has folded and the
-- slot rows it has not): hll_cardinality of the union. A key with no
-- members is 0. hll_cardinality is the classic HyperLogLog estimator;
-- PFCOUNT uses a better one on the same sketch (docs/sql.md).
CREATE FUNCTION counter_uniques(keys text[]) RETURNS TABLE (key text, estimate double precision)
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT k.key, coalesce((
        SELECT hll_cardinality(hll_union_agg(s.sketch)) FROM (
            SELECT f.sketch FROM counter_unique_sketches f WHERE f.key = k.key
            UNION ALL
            SELECT u.sketch FROM counter_unique_slots u WHERE u.key = k.key
        ) AS s
    ), 0)
    FROM unnest(keys) AS k(key)
$$;

-- counter_uniques_fold folds at most max_rows slot rows into
-- counter_unique_sketches and returns how many keys it folded into. It locks the
-- slot rows it takes (SKIP LOCKED: a round writing one is left for the
-- next fold), unions them into the key's sketch and deletes them, in one
-- statement, so a sketch is never in both places for a reader's snapshot.
CREATE FUNCTION counter_uniques_fold(max_rows integer) RETURNS integer
LANGUAGE sql SET search_path FROM CURRENT AS $$
    WITH picked AS (
        SELECT u.key, u.slot FROM counter_unique_slots u
        ORDER BY u.key, u.slot
        LIMIT max_rows
        FOR UPDATE SKIP LOCKED
    ), taken AS (
        DELETE FROM counter_unique_slots u USING picked p
        WHERE u.key = p.key AND u.slot = p.slot
        RETURNING u.key, u.sketch
    ), folded AS (
        INSERT INTO counter_unique_sketches AS f (key, sketch)
        SELECT t.key, hll_union_agg(t.sketch) FROM taken t GROUP BY t.key ORDER BY t.key
        ON CONFLICT (key) DO UPDATE SET sketch = hll_union(f.sketch, excluded.sketch)
        RETURNING 1
    )
    SELECT count(*)::integer FROM folded
$$;
