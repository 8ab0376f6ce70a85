-- 016_unique_buckets: distinct members per time bucket (PFADD to a key
-- COUNTERD_WINDOWS covers; PFCOUNT key SINCE span) as postgresql-hll
-- sketches, hll(14,5,-1,1) as in 014. A member accepted in a bucket is
-- added to that bucket's sketch of every width of its key, so a span's
-- count is hll_union_agg of its buckets' sketches: a member seen in two
-- buckets counts once. width and keep_until mean what they mean for count
-- buckets (008): 2 minute, 3 hour, 4 day; the bucket's end plus its key's
-- retention when the daemon wrote it.
--
-- The hll extension exists (014 created it or found it); its schema goes
-- on this migration's search_path, and every function below runs with
-- that path (SET search_path FROM CURRENT), as in 014.
DO $$
DECLARE
    ext_schema text;
BEGIN
    SELECT n.nspname INTO ext_schema
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'hll';
    IF ext_schema IS NULL THEN
        RAISE EXCEPTION 'counterd needs the hll extension for unique counts: run CREATE EXTENSION hll; as a superuser in this database (Debian/Ubuntu package postgresql-15-hll)'
            USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM set_config('search_path', current_setting('search_path') || ', ' || quote_ident(ext_schema), true);
END
$$;

-- counter_unique_bucket_slots holds the bucket sketches rounds wrote,
-- spread over slot rows as counter_bucket_slots are. A round unions its
-- sketch of a key's bucket into one slot row.
CREATE TABLE counter_unique_bucket_slots (
    key          text        NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 256),
    width        smallint    NOT NULL CHECK (width BETWEEN 2 AND 4),
    bucket_start timestamptz NOT NULL,
    slot         smallint    NOT NULL CHECK (slot >= 0),
    sketch       hll         NOT NULL,
    keep_until   timestamptz NOT NULL,
    PRIMARY KEY (key, width, bucket_start, slot)
);

-- counter_unique_bucket_sketches holds each key's bucket sketch as the
-- rollup folded it: the union of every slot row it took in. by_expiry lets
-- the rollup delete expired buckets in bounded chunks.
CREATE TABLE counter_unique_bucket_sketches (
    key          text        NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 256),
    width        smallint    NOT NULL CHECK (width BETWEEN 2 AND 4),
    bucket_start timestamptz NOT NULL,
    sketch       hll         NOT NULL,
    keep_until   timestamptz NOT NULL,
    PRIMARY KEY (key, width, bucket_start)
);
CREATE INDEX counter_unique_bucket_sketches_by_expiry ON counter_unique_bucket_sketches (keep_until);

-- counter_unique_buckets_write unions into one slot row of each key,
-- width and bucket (picked at random among slots) the sketch of the
-- hashes given for it: keys[i], widths[i], starts[i], the member hash
-- hashes[i], keeps[i] the bucket's keep_until. A round calls it once, in
-- its transaction, after its lanes moved: exactly once per lane. Rows are
-- taken in primary key order, so two writers never wait on each other's
-- rows in a cycle; keep_until keeps the latest.
CREATE FUNCTION counter_unique_buckets_write(keys text[], widths smallint[], starts timestamptz[],
                                             hashes bigint[], keeps timestamptz[], slots integer)
RETURNS integer
LANGUAGE sql SET search_path FROM CURRENT AS $$
    WITH sketches AS (
        SELECT b.key, b.width, b.bucket_start, hll_add_agg(b.h::hll_hashval, 14, 5, -1, 1) AS sketch,
               max(b.keep_until) AS keep_until
        FROM unnest(keys, widths, starts, hashes, keeps) AS b(key, width, bucket_start, h, keep_until)
        GROUP BY b.key, b.width, b.bucket_start
    ), written AS (
        INSERT INTO counter_unique_bucket_slots AS u (key, width, bucket_start, slot, sketch, keep_until)
        SELECT s.key, s.width, s.bucket_start, floor(random() * slots)::smallint, s.sketch, s.keep_until
        FROM sketches s
        ORDER BY s.key, s.width, s.bucket_start
        ON CONFLICT (key, width, bucket_start, slot) DO UPDATE
        SET sketch = hll_union(u.sketch, excluded.sketch), keep_until = greatest(u.keep_until, excluded.keep_until)
        RETURNING 1
    )
    SELECT count(*)::integer FROM written
$$;

-- counter_unique_buckets is the public read interface for bucket
-- sketches: one row per key, width and bucket, folded rows and slot rows
-- unioned in one statement. Filter on key (and width, bucket_start); the
-- count of a span is hll_cardinality(hll_union_agg(sketch)) over its
-- buckets, never a sum of per-bucket counts.
CREATE VIEW counter_unique_buckets AS
SELECT key, counterd_width_name(width) AS width, bucket_start, hll_union_agg(sketch) AS sketch
FROM (
    SELECT key, width, bucket_start, sketch FROM counter_unique_bucket_sketches
    UNION ALL
    SELECT key, width, bucket_start, sketch FROM counter_unique_bucket_slots
) AS parts
GROUP BY key, width, bucket_start;

-- counter_unique_bucket_sketch_text returns, for each key, the union of
-- its bucket sketches of width that start from since through until,
-- folded and not, as hll's text form (\x and hex of the storage format);
-- NULL for a key with none. The daemon reads it for PFCOUNT ... SINCE.
CREATE FUNCTION counter_unique_bucket_sketch_text(keys text[], width smallint, since timestamptz, until timestamptz)
RETURNS TABLE (key text, sketch text)
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT k.key, (
        SELECT hll_union_agg(s.sketch)::text FROM (
            SELECT f.sketch FROM counter_unique_bucket_sketches f
            WHERE f.key = k.key AND f.width = counter_unique_bucket_sketch_text.width
              AND f.bucket_start BETWEEN since AND until
            UNION ALL
            SELECT u.sketch FROM counter_unique_bucket_slots u
            WHERE u.key = k.key AND u.width = counter_unique_bucket_sketch_text.width
              AND u.bucket_start BETWEEN since AND until
        ) AS s
    )
    FROM unnest(keys) AS k(key)
$$;

-- counter_uniques_since returns, for each key, the estimated number of
-- distinct members of the union of its buckets of one width (minute,
-- hour, day) that start at or after since, from everything committed
-- (folded and not): hll_cardinality of the union, 0 for none. PFCOUNT key
-- SINCE 24h (hour buckets) is counter_uniques_since(ARRAY[key], 'hour',
-- date_trunc('hour', now()) - interval '23 hours'), with PFCOUNT's
-- estimator in place of hll_cardinality (docs/sql.md).
CREATE FUNCTION counter_uniques_since(keys text[], width text, since timestamptz)
RETURNS TABLE (key text, estimate double precision)
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT k.key, coalesce((
        SELECT hll_cardinality(hll_union_agg(s.sketch)) FROM (
            SELECT f.sketch FROM counter_unique_bucket_sketches f
            WHERE f.key = k.key AND f.width = counterd_width(counter_uniques_since.width)
              AND f.bucket_start >= since
            UNION ALL
            SELECT u.sketch FROM counter_unique_bucket_slots u
            WHERE u.key = k.key AND u.width = counterd_width(counter_uniques_since.width)
              AND u.bucket_start >= since
        ) AS s
    ), 0)
    FROM unnest(keys) AS k(key)
$$;

-- counter_unique_buckets_fold folds at most max_rows bucket slot rows
-- into counter_unique_bucket_sketches and returns how many slot rows it
-- folded. It locks the rows it takes (SKIP LOCKED: a round writing one is
-- left for the next fold), unions them into their bucket's sketch and
-- deletes them, in one statement, so a sketch is never in both places
-- for a reader's snapshot.
CREATE FUNCTION counter_unique_buckets_fold(max_rows integer) RETURNS integer
LANGUAGE sql SET search_path FROM CURRENT AS $$
    WITH picked AS (
        SELECT u.key, u.width, u.bucket_start, u.slot FROM counter_unique_bucket_slots u
        ORDER BY u.key, u.width, u.bucket_start, u.slot
        LIMIT max_rows
        FOR UPDATE SKIP LOCKED
    ), taken AS (
        DELETE FROM counter_unique_bucket_slots u USING picked p
        WHERE u.key = p.key AND u.width = p.width AND u.bucket_start = p.bucket_start AND u.slot = p.slot
        RETURNING u.key, u.width, u.bucket_start, u.sketch, u.keep_until
    ), folded AS (
        INSERT INTO counter_unique_bucket_sketches AS f (key, width, bucket_start, sketch, keep_until)
        SELECT t.key, t.width, t.bucket_start, hll_union_agg(t.sketch), max(t.keep_until)
        FROM taken t GROUP BY t.key, t.width, t.bucket_start ORDER BY t.key, t.width, t.bucket_start
        ON CONFLICT (key, width, bucket_start) DO UPDATE
        SET sketch = hll_union(f.sketch, excluded.sketch), keep_until = greatest(f.keep_until, excluded.keep_until)
        RETURNING 1
    )
    SELECT count(*)::integer FROM taken
$$;

-- counter_unique_buckets_expire deletes up to max_rows folded bucket
-- sketches whose keep_until is before at, oldest first, and returns how
-- many. Slot rows are folded first (a fold runs before it in each rollup
-- pass), as for count buckets.
CREATE FUNCTION counter_unique_buckets_expire(at timestamptz, max_rows integer) RETURNS integer
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM counter_unique_bucket_sketches r
        USING (
            SELECT key, width, bucket_start FROM counter_unique_bucket_sketches
            WHERE keep_until < coalesce(at, now())
            ORDER BY keep_until
            LIMIT max_rows
            FOR UPDATE SKIP LOCKED
        ) AS p
        WHERE r.key = p.key AND r.width = p.width AND r.bucket_start = p.bucket_start
        RETURNING 1
    )
    SELECT count(*)::integer FROM gone
$$;

COMMENT ON VIEW counter_unique_buckets IS
    'Public read interface for windowed unique counts (COUNTERD_WINDOWS): each key''s postgresql-hll sketch per bucket (folded and slot rows unioned). Union buckets with hll_union_agg; never add their counts.';
COMMENT ON FUNCTION counter_uniques_since(text[], text, timestamptz) IS
    'Each key''s estimated distinct members over its buckets of one width (minute, hour, day) that start at or after since: hll_cardinality of their union.';
