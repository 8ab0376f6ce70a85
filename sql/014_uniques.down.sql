-- The hll extension stays: other schemas of the database may use it.
DROP FUNCTION counter_uniques_fold(integer);
DROP FUNCTION counter_uniques(text[]);
DROP FUNCTION counter_unique_sketch_text(text[]);
DROP FUNCTION counter_uniques_write(text[], smallint[], bigint[]);
DROP TABLE counter_unique_sketches;
DROP TABLE counter_unique_slots;
