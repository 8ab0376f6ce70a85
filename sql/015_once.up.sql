-- counter_seen is INCRONCE's seen set: per key and visitor, the accept
-- time of the visitor's last counted view of the key. A view counts (adds
-- 1 to the key's total) when the visitor has no row or the view is at
-- least its window after counted_at; counterd decides in the round's
-- transaction, locking the row, so daemons deciding the same visitor take
-- turns. visitor_hash is the first 8 bytes of SHA-256 of the visitor, as
-- a signed bigint. keep_until is counted_at plus the window it was counted
-- with: the rollup deletes rows an hour past it.
CREATE TABLE counter_seen (
    key          text        NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 256),
    visitor_hash bigint      NOT NULL,
    counted_at   timestamptz,
    keep_until   timestamptz,
    PRIMARY KEY (key, visitor_hash)
);

-- The rollup prunes from the earliest keep_until on.
CREATE INDEX counter_seen_by_keep_until ON counter_seen (keep_until);

COMMENT ON TABLE counter_seen IS
    'INCRONCE''s seen set: the accept time of each visitor''s last counted view of a key (visitor_hash: first 8 bytes of SHA-256 of the visitor, big endian, as bigint).';
COMMENT ON COLUMN counter_seen.keep_until IS
    'counted_at plus the window the view was counted with; the rollup deletes the row an hour after it.';
