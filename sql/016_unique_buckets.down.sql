-- The hll extension stays (014's down leaves it too).
DROP FUNCTION counter_unique_buckets_expire(timestamptz, integer);
DROP FUNCTION counter_unique_buckets_fold(integer);
DROP FUNCTION counter_uniques_since(text[], text, timestamptz);
DROP FUNCTION counter_unique_bucket_sketch_text(text[], smallint, timestamptz, timestamptz);
DROP VIEW counter_unique_buckets;
DROP FUNCTION counter_unique_buckets_write(text[], smallint[], timestamptz[], bigint[], timestamptz[], integer);
DROP TABLE counter_unique_bucket_sketches;
DROP TABLE counter_unique_bucket_slots;
