DROP TABLE counter_expiry;
