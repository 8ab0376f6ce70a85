-- Budgets: bounded counters that never overspend (TAKE), and sequences
-- (NEXT). See internal/budget for the design.
--
-- Every unit of a budget is in exactly one of four states, and every
-- statement keeps
--     granted + leased + forfeited + remaining = total,  remaining >= 0
-- where remaining = total - granted - leased - forfeited is computed, never
-- stored. The CHECK constraints make the database refuse any statement
-- that would overspend, whatever the daemons do.
--   granted:   handed out (TAKE replied n), as recorded in PostgreSQL;
--   leased:    in live leases of daemons, not yet recorded as granted
--              (a daemon's grants are recorded when its round is flushed);
--   forfeited: in leases whose holder did not renew them within
--              COUNTERD_LEASE_TTL; they come back to remaining only when
--              the holder itself returns them, and grants recorded late
--              against them move them to granted.
CREATE TABLE budgets (
    key        text PRIMARY KEY,
    total      bigint NOT NULL CHECK (total >= 0),
    granted    bigint NOT NULL DEFAULT 0 CHECK (granted >= 0),
    leased     bigint NOT NULL DEFAULT 0 CHECK (leased >= 0),
    forfeited  bigint NOT NULL DEFAULT 0 CHECK (forfeited >= 0),
    -- The size of the last lease taken: one UPDATE sets it and leased
    -- from the same old row, so the statement can return the size it
    -- chose.
    last_lease bigint NOT NULL DEFAULT 0,
    CONSTRAINT budgets_never_overspent CHECK (granted + leased + forfeited <= total)
);

-- A lease is a share of one budget held by one daemon (holder: its
-- journal's instance id, stable across restarts). size is what the
-- database still counts in the lease: units not granted plus units granted
-- whose grant is not recorded yet. Grants recorded against the lease and
-- units returned take from size; size never goes below 0.
CREATE TABLE budget_leases (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key        text NOT NULL,
    holder     text NOT NULL,
    size       bigint NOT NULL CHECK (size >= 0),
    leased     bigint NOT NULL,
    granted    bigint NOT NULL DEFAULT 0,
    -- Units the holder gave back unused. Returns name the total to
    -- reach, so a return retried after a lost reply takes nothing twice.
    returned   bigint NOT NULL DEFAULT 0,
    -- Once set, size is counted in budgets.forfeited instead of leased.
    forfeited  boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX budget_leases_by_holder ON budget_leases (holder);
CREATE INDEX budget_leases_live_by_expiry ON budget_leases (expires_at) WHERE NOT forfeited;

-- NEXT key: next is the first number no daemon has leased yet.
CREATE TABLE budget_sequences (
    key  text PRIMARY KEY,
    next bigint NOT NULL CHECK (next >= 1)
);

CREATE VIEW budget_totals AS
SELECT key, total - granted - leased - forfeited AS remaining, granted, leased, forfeited, total
FROM budgets;
COMMENT ON VIEW budget_totals IS 'Each budget: remaining (unleased, ungranted), granted (recorded), leased (in daemons'' live leases), forfeited (in expired leases; under-spend), total.';

-- budget_add(key, n) creates budget key or adds n to its total (n may be
-- negative, but never below what is granted, leased or forfeited), and
-- returns the new remainder. BUDGET key n calls it.
CREATE FUNCTION budget_add(k text, n bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    r bigint;
BEGIN
    IF n < 0 THEN
        UPDATE budgets AS b SET total = b.total + n
        WHERE b.key = k AND b.total + n >= b.granted + b.leased + b.forfeited
        RETURNING b.total - b.granted - b.leased - b.forfeited INTO r;
    ELSE
        INSERT INTO budgets AS b (key, total) VALUES (k, n)
        ON CONFLICT (key) DO UPDATE SET total = b.total + n
        RETURNING b.total - b.granted - b.leased - b.forfeited INTO r;
    END IF;
    IF r IS NULL THEN
        RAISE EXCEPTION 'budget %: cannot add %: the total would go below what is granted, leased or forfeited', k, n
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN r;
END
$$;
