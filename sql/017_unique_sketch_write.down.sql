DROP FUNCTION counter_uniques_write_sketches(text[], smallint[], bytea[]);
