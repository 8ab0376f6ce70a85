DROP FUNCTION IF EXISTS counterd_add(text[], bigint[], smallint[]);
DROP VIEW IF EXISTS counter_totals;
DROP TABLE IF EXISTS counter_slots;
DROP TABLE IF EXISTS counters;
