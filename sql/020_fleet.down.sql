DROP VIEW counterd_fleet;

ALTER TABLE counterd_owners
    DROP COLUMN version,
    DROP COLUMN migration,
    DROP COLUMN ttl_seconds,
    DROP COLUMN queued_rounds,
    DROP COLUMN reported_generation;

ALTER TABLE counterd_migrations DROP COLUMN compatible_with;
