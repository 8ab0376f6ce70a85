ALTER TABLE counter_seen DROP COLUMN counted_before;
