-- counter_set_members holds counterd's exact sets (SADD/SREM): one row
-- per member of a key, and no row for anything else. A round decides its
-- operations in its transaction: it upserts a row for each (key, member)
-- it touches, in sorted order (added_at NULL marks a row it created, so
-- a row with added_at set was a member), applies the operations in
-- accept order, and deletes the rows that end up no member. The key's
-- cardinality is not counted here: it is the key's total in the slot
-- rows, moved in the same transaction by what the round really added and
-- removed, so counter_totals reads it like any counter.
CREATE TABLE counter_set_members (
    key      text        NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 256),
    member   bytea       NOT NULL CHECK (octet_length(member) BETWEEN 1 AND 512),
    added_at timestamptz,
    PRIMARY KEY (key, member)
);

COMMENT ON TABLE counter_set_members IS
    'counterd''s exact sets (SADD/SREM): one row per member of a key; the key''s cardinality is its total (counter_totals).';
COMMENT ON COLUMN counter_set_members.added_at IS
    'accept time of the SADD that added the member (NULL only inside the round that is deciding it).';

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
