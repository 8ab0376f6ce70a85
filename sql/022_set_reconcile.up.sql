-- 022_set_reconcile: counter_set_reconcile, which repairs an exact set
-- from the app's own membership table (likes(post_id, user_id)). It adds
-- a function only, so the daemons that know 021 keep running against it.
--
-- compatible-with: 21

-- counter_set_reconcile makes key's set equal members, as of as_of (the
-- start of the app's snapshot members were read in), and returns how
-- many members it added and removed. A row decided at or after as_of
-- (changed_at >= as_of: an SADD or SREM accepted after the snapshot
-- began, or a reconcile as of a later time) is left alone, whichever way
-- it differs: the operation is newer than what the snapshot knows. So,
-- when the app commits its row before it sends SADD and deletes it
-- before it sends SREM, an operation running at the same time is never
-- undone. A removed member's row stays as a tombstone (added_at NULL,
-- changed_at as_of) as the daemons' SREM leaves it.
--
-- It locks the key's member rows and those of members (creating them),
-- in member order, as a round does (a round locks (key, member) in
-- sorted order): a round and a reconcile of the same members take turns,
-- and a round that decides after it sees the repaired rows. The key's
-- total (the cardinality) moves by added less removed, into a slot row
-- of the key no other transaction holds (else slot 0), as a round's
-- delta: counter_totals reads it at once, the rollup folds it (and into
-- ROLLUP_TARGETS' columns) like any increment. A NULL members is an
-- error (an empty array empties the set); duplicates count once.
CREATE FUNCTION counter_set_reconcile(key text, members bytea[], as_of timestamptz)
RETURNS TABLE (added bigint, removed bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    locking bytea[];
    wanted boolean[];
    adds bytea[];
    dels bytea[];
    delta bigint;
BEGIN
    IF $2 IS NULL OR $3 IS NULL THEN
        RAISE EXCEPTION 'counter_set_reconcile: members and as_of must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- The key's set lock, shared, as a round deciding set operations
    -- takes it (internal/slots: keyLock), so a DEL or SET of the key
    -- (which holds it exclusive) and a reconcile take turns: the total a
    -- DEL replaces and the rows it deletes stay the same set.
    PERFORM pg_advisory_xact_lock_shared(1668183140, hashtext($1));
    -- The rows it may change, in member order: the wanted members and
    -- the key's members, each with whether it is wanted (a NULL element
    -- fails the insert below).
    SELECT array_agg(u.m ORDER BY u.m), array_agg(u.wanted ORDER BY u.m) INTO locking, wanted FROM (
        SELECT v.m, bool_or(v.wanted) FROM (
            SELECT w.m, true FROM unnest($2) AS w(m)
            UNION ALL
            SELECT c.member, false FROM counter_set_members c WHERE c.key = $1 AND c.added_at IS NOT NULL
        ) AS v(m, wanted)
        GROUP BY v.m
    ) AS u(m, wanted);
    IF locking IS NULL THEN
        added := 0;
        removed := 0;
        RETURN NEXT;
        RETURN;
    END IF;
    -- Lock them in that order, creating the missing ones (no member):
    -- the update's false condition locks a row without writing a new
    -- version of it, so a set in step with the app costs no writes.
    INSERT INTO counter_set_members AS s (key, member)
    SELECT $1, l.m FROM unnest(locking) WITH ORDINALITY AS l(m, ord)
    ORDER BY l.ord
    ON CONFLICT (key, member) DO UPDATE SET added_at = s.added_at WHERE false;
    -- Read them as the last commit left them (a new snapshot; they are
    -- locked now), and pick what differs, decided before as_of.
    SELECT array_agg(c.member) FILTER (WHERE c.added_at IS NULL AND l.wanted),
           array_agg(c.member) FILTER (WHERE c.added_at IS NOT NULL AND NOT l.wanted)
    INTO adds, dels
    FROM unnest(locking, wanted) AS l(m, wanted)
    JOIN counter_set_members c ON c.key = $1 AND c.member = l.m
    WHERE c.changed_at IS NULL OR c.changed_at < $3;

    added := coalesce(cardinality(adds), 0);
    removed := coalesce(cardinality(dels), 0);
    IF added + removed > 0 THEN
        UPDATE counter_set_members s
        SET added_at = CASE WHEN u.add THEN $3 END, changed_at = $3
        FROM (SELECT a.m, true FROM unnest(adds) AS a(m)
              UNION ALL
              SELECT d.m, false FROM unnest(dels) AS d(m)) AS u(m, add)
        WHERE s.key = $1 AND s.member = u.m;
    END IF;
    -- Every row it created is a wanted member with no changed_at, so
    -- added: none is left behind as a tombstone without changed_at.
    delta := added - removed;
    IF delta <> 0 THEN
        INSERT INTO counter_slots AS cs (key, slot, count, variance)
        VALUES ($1, coalesce((SELECT f.slot FROM counter_slots f WHERE f.key = $1
                              ORDER BY f.slot LIMIT 1 FOR UPDATE SKIP LOCKED), 0), delta, 0)
        ON CONFLICT (key, slot) DO UPDATE SET count = cs.count + excluded.count;
    END IF;
    RETURN NEXT;
END
$$;

COMMENT ON FUNCTION counter_set_reconcile(text, bytea[], timestamptz) IS
    'makes key''s exact set equal members, except rows decided at or after as_of; moves the key''s total by added - removed (docs/sql.md, Reconciling a set).';
