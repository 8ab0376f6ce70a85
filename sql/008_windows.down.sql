DROP FUNCTION counter_trending(text, text, timestamptz, integer);
DROP FUNCTION counter_sum_since(text, text, timestamptz);
DROP VIEW counter_buckets;
DROP TABLE counter_bucket_rows;
DROP TABLE counter_bucket_slots;
DROP FUNCTION counterd_width_name(smallint);
DROP FUNCTION counterd_width(text);
