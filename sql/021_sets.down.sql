DROP FUNCTION counter_set_contains(text, bytea);
DROP FUNCTION counter_set_members_of(text, integer, bytea);
DROP TABLE counter_set_members;
