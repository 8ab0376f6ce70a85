-- A lease remembers the request that took it: a number its holder picks
-- before it sends the statement. When the reply to a lease is lost (the
-- holder's deadline passed while PostgreSQL committed), the holder never
-- learns the lease's id and never grants from it; knowing the request, it
-- finds the lease later and returns it whole instead of renewing units it
-- will never sell until it stops.
ALTER TABLE budget_leases ADD COLUMN request bigint;
CREATE INDEX budget_leases_by_request ON budget_leases (holder, request) WHERE request IS NOT NULL;
