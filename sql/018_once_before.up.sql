-- counted_before is the accept time of the counted view before
-- counted_at (NULL for none known), so a view decided late, after a
-- later view of the same visitor counted (a daemon that replayed its
-- journal after an outage), is decided against the views on both sides
-- of it instead of being dropped.
ALTER TABLE counter_seen ADD COLUMN counted_before timestamptz;

COMMENT ON COLUMN counter_seen.counted_before IS
    'accept time of the counted view before counted_at, NULL for none known: a view decided after a later one counted is checked against both.';
