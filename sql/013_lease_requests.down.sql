DROP INDEX budget_leases_by_request;
ALTER TABLE budget_leases DROP COLUMN request;
