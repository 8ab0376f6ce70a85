DROP FUNCTION IF EXISTS counterd_apply(text, bigint, text[], bigint[], smallint[]);
DROP TABLE IF EXISTS counterd_instances;
