-- Time windows (COUNTERD_WINDOWS): a key's count per minute, hour or day
-- bucket besides its all-time total. The daemon stamps each increment with
-- the UTC-aligned bucket its accept clock was in and writes it like a
-- total: slotted upserts into counter_bucket_slots, in the same statement
-- and exactly-once lane transaction as the totals of the round. The rollup
-- folds slot rows into counter_bucket_rows and deletes buckets whose
-- keep_until has passed.
--
-- width is the bucket width as a small integer (2 minute, 3 hour, 4 day:
-- counterd's change kinds); counterd_width and counterd_width_name map it
-- to and from text. keep_until is the bucket's end plus the retention its
-- key had in COUNTERD_WINDOWS when the daemon wrote it, so the rollup
-- needs no copy of the configuration to expire buckets.

-- counterd_width is the width code of 'minute', 'hour' or 'day'; any other
-- text is an error naming it (the cast of the message fails). It is
-- IMMUTABLE SQL, so a constant argument is folded at plan time and an
-- index condition on width stays an index condition.
CREATE FUNCTION counterd_width(width text) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT CASE width
    WHEN 'minute' THEN 2::smallint
    WHEN 'hour' THEN 3::smallint
    WHEN 'day' THEN 4::smallint
    ELSE ('unknown width ' || quote_literal(width) || ' (minute, hour or day)')::smallint
END
$$;

-- counterd_width_name is the text of a width code.
CREATE FUNCTION counterd_width_name(width smallint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT CASE width WHEN 2 THEN 'minute' WHEN 3 THEN 'hour' WHEN 4 THEN 'day' END
$$;

-- counter_bucket_slots is counter_slots for buckets: up to COUNTERD_SLOTS
-- rows per key, width and bucket, so concurrent writers of a hot key do
-- not queue on one row. Only count, variance and keep_until change on
-- an upsert, none indexed, so the update can be HOT.
CREATE TABLE counter_bucket_slots (
    key          text             NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 256),
    width        smallint         NOT NULL CHECK (width BETWEEN 2 AND 4),
    bucket_start timestamptz      NOT NULL,
    slot         smallint         NOT NULL CHECK (slot >= 0),
    count        numeric          NOT NULL,
    variance     double precision NOT NULL DEFAULT 0,
    keep_until   timestamptz      NOT NULL,
    PRIMARY KEY (key, width, bucket_start, slot)
) WITH (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05
);

-- counter_bucket_rows holds the folded count of each key, width and
-- bucket. The primary key serves one key's range of buckets (sum since,
-- RANGE); counter_bucket_rows_by_time serves every key's buckets of one
-- width since a time (trending), as an index-only scan; by_expiry lets
-- the rollup delete expired buckets in bounded chunks.
CREATE TABLE counter_bucket_rows (
    key          text             NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 256),
    width        smallint         NOT NULL CHECK (width BETWEEN 2 AND 4),
    bucket_start timestamptz      NOT NULL,
    total        numeric          NOT NULL,
    variance     double precision NOT NULL DEFAULT 0,
    keep_until   timestamptz      NOT NULL,
    PRIMARY KEY (key, width, bucket_start)
);
CREATE INDEX counter_bucket_rows_by_time ON counter_bucket_rows (width, bucket_start) INCLUDE (key, total);
CREATE INDEX counter_bucket_rows_by_expiry ON counter_bucket_rows (keep_until);

-- counter_buckets is the public read interface for buckets: one row per
-- key, width and bucket with a count, folded rows plus slot rows read in
-- one statement. total is NULL beyond int64, as in counter_totals. Filter
-- on key (and width, bucket_start) for index lookups.
CREATE VIEW counter_buckets AS
SELECT key,
       counterd_width_name(width) AS width,
       bucket_start,
       CASE WHEN sum(n) BETWEEN -9223372036854775808 AND 9223372036854775807
            THEN sum(n)::bigint END AS total
FROM (
    SELECT key, width, bucket_start, total AS n FROM counter_bucket_rows
    UNION ALL
    SELECT key, width, bucket_start, count AS n FROM counter_bucket_slots
) AS parts
GROUP BY key, width, bucket_start;

-- counter_sum_since is a key's count over the buckets of one width that
-- start at or after since, with how exact it is: an index range scan of
-- the primary keys of both bucket tables. COUNT key SINCE 24h (hour
-- buckets) is counter_sum_since(key, 'hour', date_trunc('hour', now()) -
-- interval '23 hours'). Inlined into the caller (single SELECT, SQL,
-- STABLE).
CREATE FUNCTION counter_sum_since(key text, width text, since timestamptz)
RETURNS TABLE (total bigint, exact boolean, error95 bigint)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
SELECT CASE WHEN coalesce(sum(p.n), 0) BETWEEN -9223372036854775808 AND 9223372036854775807
            THEN coalesce(sum(p.n), 0)::bigint END,
       coalesce(sum(p.v), 0) = 0,
       ceil(1.96 * sqrt(coalesce(sum(p.v), 0)))::bigint
FROM (
    SELECT r.total AS n, r.variance AS v FROM counter_bucket_rows r
    WHERE r.key = counter_sum_since.key
      AND r.width = counterd_width(counter_sum_since.width)
      AND r.bucket_start >= counter_sum_since.since
    UNION ALL
    SELECT s.count, s.variance FROM counter_bucket_slots s
    WHERE s.key = counter_sum_since.key
      AND s.width = counterd_width(counter_sum_since.width)
      AND s.bucket_start >= counter_sum_since.since
) AS p
$$;

-- counter_trending is the n keys starting with prefix (NULL: every key)
-- with the largest count over the buckets of one width that start at or
-- after since, largest first, ties by key; a key whose count there is 0
-- is left out (a round that nets to 0 writes nothing, so a 0 would show
-- or not depending on how increments fell into rounds). It reads only those buckets:
-- an index-only range scan of counter_bucket_rows_by_time plus the slot
-- rows (which the rollup keeps few), so its cost follows the rows in the
-- window, not the number of keys. TOP post:* hour 24 10 is
-- counter_trending('post:', 'hour', date_trunc('hour', now()) - interval
-- '23 hours', 10).
CREATE FUNCTION counter_trending(prefix text, width text, since timestamptz, n integer)
RETURNS TABLE (key text, total bigint)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
SELECT t.key,
       CASE WHEN t.amount BETWEEN -9223372036854775808 AND 9223372036854775807
            THEN t.amount::bigint END
FROM (
    SELECT p.key, sum(p.n) AS amount FROM (
        SELECT r.key, r.total AS n FROM counter_bucket_rows r
        WHERE r.width = counterd_width(counter_trending.width)
          AND r.bucket_start >= counter_trending.since
          AND (counter_trending.prefix IS NULL OR starts_with(r.key, counter_trending.prefix))
        UNION ALL
        SELECT s.key, s.count FROM counter_bucket_slots s
        WHERE s.width = counterd_width(counter_trending.width)
          AND s.bucket_start >= counter_trending.since
          AND (counter_trending.prefix IS NULL OR starts_with(s.key, counter_trending.prefix))
    ) AS p
    GROUP BY p.key
    HAVING sum(p.n) <> 0
) AS t
ORDER BY t.amount DESC, t.key
LIMIT counter_trending.n
$$;

COMMENT ON VIEW counter_buckets IS
    'Public read interface for time windows (COUNTERD_WINDOWS): each key''s count per bucket (folded rows plus slot rows, read in one statement). Filter on key for index lookups; for sums use counter_sum_since, for trending counter_trending.';
COMMENT ON COLUMN counter_buckets.key IS 'The counter''s key.';
COMMENT ON COLUMN counter_buckets.width IS 'Bucket width: minute, hour or day.';
COMMENT ON COLUMN counter_buckets.bucket_start IS 'Start of the bucket, aligned in UTC.';
COMMENT ON COLUMN counter_buckets.total IS 'Increments the daemon accepted in the bucket; NULL when beyond int64.';
COMMENT ON FUNCTION counter_sum_since(text, text, timestamptz) IS
    'A key''s count over its buckets of one width (minute, hour, day) that start at or after since, with exact and the 95% error bound; an index range scan.';
COMMENT ON FUNCTION counter_trending(text, text, timestamptz, integer) IS
    'The n keys starting with prefix (NULL: all) with the largest non-zero count over the buckets of one width that start at or after since, largest first, ties by key; an index range scan of those buckets.';
