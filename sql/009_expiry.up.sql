-- counter_expiry says when a key's total expires (EXPIRE, COUNTERD_KEY_TTL).
-- Once expires_at has passed the key reads as 0 to counterd's GET (the
-- SQL views show the old total until the key is reset or deleted);
-- the next write of the key deletes the row and writes a compensation that
-- zeroes what was stored, so its increments start a new life, and the
-- rollup deletes expired keys' rows in bounded chunks.
--
-- idle is NULL for an explicit expiry (EXPIRE, SET ... EX) and the
-- retention for one COUNTERD_KEY_TTL set: each write of the key moves
-- such a row to now() + idle, but never overrides an explicit one.
CREATE TABLE counter_expiry (
    key        text        PRIMARY KEY CHECK (octet_length(key) BETWEEN 1 AND 256),
    expires_at timestamptz NOT NULL,
    idle       interval
);

-- The rollup finds expired keys from the earliest on.
CREATE INDEX counter_expiry_by_time ON counter_expiry (expires_at);

COMMENT ON TABLE counter_expiry IS
    'When each key with an expiry expires (EXPIRE, COUNTERD_KEY_TTL). A key past expires_at reads as 0 to counterd''s GET; counter_totals shows its old total until its next write resets it or the rollup deletes it.';
COMMENT ON COLUMN counter_expiry.idle IS
    'NULL for an explicit expiry; the idle retention for one COUNTERD_KEY_TTL set, renewed by each write of the key.';
