-- counter_set_members holds counterd's exact sets (SADD/SREM): one row
-- per (key, member) an operation or a reconcile decided. A row with
-- added_at set is a member; a row with added_at NULL is not (a removed
-- member's tombstone, or an SREM of a non-member), and only tells when it
-- was last decided (changed_at), so a reconcile against the app's table
-- (counter_set_reconcile, migration 022) never undoes a newer operation;
-- the rollup deletes such rows ROLLUP_SET_TOMBSTONE_SLACK after
-- changed_at. A round decides its operations in its transaction: it
-- upserts a row for each (key, member) it touches, in sorted order (a row
-- it creates has added_at NULL: no member), applies the operations in
-- accept order, and saves every row it decided (added_at, changed_at) in
-- one statement. The key's cardinality is not counted here: it is the
-- key's total in the slot rows, moved in the same transaction by what
-- the round really added and removed, so counter_totals reads it like
-- any counter.
CREATE TABLE counter_set_members (
    key        text        NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 256),
    member     bytea       NOT NULL CHECK (octet_length(member) BETWEEN 1 AND 512),
    added_at   timestamptz,
    changed_at timestamptz,
    PRIMARY KEY (key, member)
);

-- The rollup's prune of tombstones reads only them, oldest first.
CREATE INDEX counter_set_members_tombstones ON counter_set_members (changed_at)
    WHERE added_at IS NULL;

COMMENT ON TABLE counter_set_members IS
    'counterd''s exact sets (SADD/SREM): a row per member of a key (added_at set) and per recent non-member (added_at NULL); the key''s cardinality is its total (counter_totals).';
COMMENT ON COLUMN counter_set_members.added_at IS
    'accept time of the SADD that added the member (or a reconcile''s as_of); NULL: not a member.';
COMMENT ON COLUMN counter_set_members.changed_at IS
    'latest accept time of the SADD/SREM decided on the row (or a reconcile''s as_of that changed it); a reconcile as of an earlier time leaves the row alone.';

-- counter_set_members_of lists up to lim members of key, in byte order,
-- after the member after (NULL: from the first): a cursor for the app's
-- own queries and for SMEMBERS. A set whose expiry passed has none, as
-- its total reads 0 (its rows go with its next write or the rollup).
CREATE FUNCTION counter_set_members_of(key text, lim integer, after bytea DEFAULT NULL)
RETURNS TABLE (member bytea)
LANGUAGE sql STABLE AS $$
    SELECT m.member FROM counter_set_members m
    WHERE m.key = $1 AND m.added_at IS NOT NULL AND ($3 IS NULL OR m.member > $3)
      AND NOT EXISTS (SELECT 1 FROM counter_expiry x WHERE x.key = $1 AND x.expires_at <= now())
    ORDER BY m.member
    LIMIT $2
$$;

-- counter_set_contains says whether member is in key's set.
CREATE FUNCTION counter_set_contains(key text, member bytea) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM counter_set_members m
                   WHERE m.key = $1 AND m.member = $2 AND m.added_at IS NOT NULL)
       AND NOT EXISTS (SELECT 1 FROM counter_expiry x WHERE x.key = $1 AND x.expires_at <= now())
$$;
