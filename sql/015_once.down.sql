DROP TABLE counter_seen;
