-- 020_fleet: what a rolling upgrade checks and shows. Expand-only: it
-- adds columns and a view, so the daemons of the previous release (which
-- know migrations up to 019) keep running against it.
--
-- compatible-with: 19

-- compatible_with is the oldest migration a binary must know to run
-- against a schema that has this one (an up file's "-- compatible-with:"
-- line, else the migration itself). A binary reads it for the migrations
-- it does not have and refuses to start unless each allows it. Rows
-- recorded before this migration are NULL; every binary that reads the
-- column knows them.
ALTER TABLE counterd_migrations ADD COLUMN compatible_with integer;

COMMENT ON COLUMN counterd_migrations.compatible_with IS
    'the oldest migration a binary must know to run against a schema with this one; a binary whose newest migration is older refuses to start (docs/upgrading.md)';

-- What each run reports of itself in counterd_owners, for counterd_fleet:
-- its version and newest migration and its COUNTERD_OWNER_TTL, written
-- when it claims the instance, and the rounds it holds uncommitted,
-- written at each heartbeat. reported_generation is the generation that
-- wrote them: a run of a release before this migration claims without
-- them, and the view does not show an earlier run's values as its own.
ALTER TABLE counterd_owners
    ADD COLUMN version             text,
    ADD COLUMN migration           integer,
    ADD COLUMN ttl_seconds         double precision,
    ADD COLUMN queued_rounds       integer,
    ADD COLUMN reported_generation text;

-- counterd_fleet lists every journal instance claimed on this database:
-- the run that owns it, whether it is live by the rule each daemon counts
-- the fleet with (not released, heartbeated within its TTL; 30 s, the
-- default, for a run that does not report its TTL), the rounds it held
-- uncommitted at its last heartbeat, and when a round of the instance
-- last committed (the latest of its lanes in counterd_instances). version,
-- migration and queued_rounds are NULL for a run of a release before
-- migration 020.
CREATE VIEW counterd_fleet AS
SELECT o.instance,
       o.host,
       o.pid,
       CASE WHEN r.reported THEN o.version END   AS version,
       CASE WHEN r.reported THEN o.migration END AS migration,
       o.claimed_at,
       o.heartbeat_at,
       NOT o.released AND o.heartbeat_at > now() - coalesce(CASE WHEN r.reported THEN o.ttl_seconds END, 30) * interval '1 second' AS live,
       o.released,
       CASE WHEN r.reported THEN o.queued_rounds END AS queued_rounds,
       c.last_commit_at
FROM counterd_owners o
CROSS JOIN LATERAL (SELECT o.reported_generation IS NOT DISTINCT FROM o.generation AS reported) r
LEFT JOIN (
    SELECT split_part(split_part(instance, '/', 1), '.', 1) AS instance, max(updated_at) AS last_commit_at
    FROM counterd_instances GROUP BY 1
) c ON c.instance = o.instance;

COMMENT ON VIEW counterd_fleet IS
    'the daemons on this database: each journal instance, the run that owns it, its version, whether it is live, the rounds it holds uncommitted and when one last committed (docs/sql.md, docs/upgrading.md)';
