-- The read interface on a PL/Proxy cluster's proxy database, and
-- budget_add: every function and view of docs/sql.md under the same name
-- and types as on one database, as PL/Proxy functions over the
-- partitions' own (TestSQLDocExamples compares them). counterd migrate
-- (and counterd at start) runs this in the DATABASE_URL schema with
-- COUNTERD_CLUSTER set, with :cluster replaced by the cluster's name (a
-- plain identifier, checked). Every statement replaces what was there, so
-- running it again is harmless.
--
-- Each names its partition function (TARGET) without a schema, so a
-- partition finds it on its own search_path, whatever schema the proxy's
-- functions live in.
--
-- A function of keys splits them (SPLIT) and runs on each key's partition
-- (RUN ON hashtext(key)), where counterd put its rows; a ranking runs on
-- every partition (RUN ON ALL) and is merged here. No statement spans a
-- transaction across partitions: each partition answers from its own
-- snapshot.

CREATE OR REPLACE FUNCTION counter_totals(keys text[]) RETURNS TABLE (key text, total bigint)
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; SPLIT keys; RUN ON hashtext(keys); TARGET counter_totals; $$;

CREATE OR REPLACE FUNCTION counter_estimates(keys text[])
RETURNS TABLE (key text, total bigint, exact boolean, variance double precision, error95 bigint)
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; SPLIT keys; RUN ON hashtext(keys); TARGET counter_estimates; $$;

CREATE OR REPLACE FUNCTION counter_unfolded(keys text[]) RETURNS TABLE (key text, unfolded numeric)
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; SPLIT keys; RUN ON hashtext(keys); TARGET counter_unfolded; $$;

CREATE OR REPLACE FUNCTION counter_unique_sketch_text(keys text[]) RETURNS TABLE (key text, sketch text)
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; SPLIT keys; RUN ON hashtext(keys); TARGET counter_unique_sketch_text; $$;

CREATE OR REPLACE FUNCTION counter_unique_bucket_sketch_text(keys text[], width smallint, since timestamptz, until timestamptz)
RETURNS TABLE (key text, sketch text)
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; SPLIT keys; RUN ON hashtext(keys); TARGET counter_unique_bucket_sketch_text; $$;

CREATE OR REPLACE FUNCTION counter_uniques(keys text[]) RETURNS TABLE (key text, estimate double precision)
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; SPLIT keys; RUN ON hashtext(keys); TARGET counter_uniques; $$;

CREATE OR REPLACE FUNCTION counter_uniques_since(keys text[], width text, since timestamptz)
RETURNS TABLE (key text, estimate double precision)
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; SPLIT keys; RUN ON hashtext(keys); TARGET counter_uniques_since; $$;

CREATE OR REPLACE FUNCTION counter_sum_since(key text, width text, since timestamptz)
RETURNS TABLE (total bigint, exact boolean, error95 bigint)
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; RUN ON hashtext(key); TARGET counter_sum_since; $$;

-- Rankings: each partition's top n, merged. A key's count is on its
-- partition alone, so the cluster's top n are among the partitions'.
CREATE OR REPLACE FUNCTION counter_top_partitions(n integer, prefix text)
RETURNS TABLE (key text, total bigint)
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; RUN ON ALL; TARGET counter_top; $$;

CREATE OR REPLACE FUNCTION counter_top(n integer, prefix text DEFAULT NULL)
RETURNS TABLE (key text, total bigint)
LANGUAGE sql STABLE AS $$
    SELECT t.key, t.total FROM counter_top_partitions(n, prefix) AS t
    ORDER BY t.total DESC NULLS FIRST, t.key LIMIT n
$$;

CREATE OR REPLACE FUNCTION counter_trending_partitions(prefix text, width text, since timestamptz, n integer)
RETURNS TABLE (key text, total bigint)
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; RUN ON ALL; TARGET counter_trending; $$;

CREATE OR REPLACE FUNCTION counter_trending(prefix text, width text, since timestamptz, n integer)
RETURNS TABLE (key text, total bigint)
LANGUAGE sql STABLE AS $$
    SELECT t.key, t.total FROM counter_trending_partitions(prefix, width, since, n) AS t
    ORDER BY t.total DESC NULLS FIRST, t.key LIMIT n
$$;

-- Budgets: one budget's row is on its key's partition; the view lists
-- every partition's.
CREATE OR REPLACE FUNCTION budget_totals_of(keys text[])
RETURNS TABLE (key text, remaining bigint, granted bigint, leased bigint, forfeited bigint, total bigint)
LANGUAGE plproxy AS $$
    CLUSTER ':cluster'; SPLIT keys; RUN ON hashtext(keys);
    SELECT key, remaining, granted, leased, forfeited, total FROM budget_totals WHERE key = ANY(keys);
$$;

CREATE OR REPLACE FUNCTION budget_totals_all()
RETURNS TABLE (key text, remaining bigint, granted bigint, leased bigint, forfeited bigint, total bigint)
LANGUAGE plproxy AS $$
    CLUSTER ':cluster'; RUN ON ALL;
    SELECT key, remaining, granted, leased, forfeited, total FROM budget_totals;
$$;

CREATE OR REPLACE VIEW budget_totals AS SELECT * FROM budget_totals_all();

-- budget_add runs on the budget's partition and commits there when it
-- returns (PL/Proxy's remote call is its own transaction): a rollback of
-- the caller's transaction does not undo it.
CREATE OR REPLACE FUNCTION budget_add(k text, n bigint) RETURNS bigint
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; RUN ON hashtext(k); TARGET budget_add; $$;

-- The views: every partition's rows, each partition from its own
-- snapshot. A filter on key is applied here, after every partition has
-- sent all its rows, so a key's rows are read faster through the
-- functions of keys above.

CREATE OR REPLACE FUNCTION counter_totals_all() RETURNS TABLE (key text, total bigint)
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; RUN ON ALL; SELECT key, total FROM counter_totals; $$;

CREATE OR REPLACE VIEW counter_totals AS SELECT * FROM counter_totals_all();

CREATE OR REPLACE FUNCTION counter_estimates_all()
RETURNS TABLE (key text, total bigint, exact boolean, variance double precision, error95 bigint)
LANGUAGE plproxy AS $$
    CLUSTER ':cluster'; RUN ON ALL;
    SELECT key, total, exact, variance, error95 FROM counter_estimates;
$$;

CREATE OR REPLACE VIEW counter_estimates AS SELECT * FROM counter_estimates_all();

CREATE OR REPLACE FUNCTION counter_overflows_all() RETURNS TABLE (key text, total numeric)
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; RUN ON ALL; SELECT key, total FROM counter_overflows; $$;

CREATE OR REPLACE VIEW counter_overflows AS SELECT * FROM counter_overflows_all();

CREATE OR REPLACE FUNCTION counter_buckets_all()
RETURNS TABLE (key text, width text, bucket_start timestamptz, total bigint)
LANGUAGE plproxy AS $$
    CLUSTER ':cluster'; RUN ON ALL;
    SELECT key, width, bucket_start, total FROM counter_buckets;
$$;

CREATE OR REPLACE VIEW counter_buckets AS SELECT * FROM counter_buckets_all();

-- The fleet: every daemon claims its instance on every partition, so the
-- proxy shows each instance once, as the partition that sees it worst:
-- not live if not live there, its oldest heartbeat there, and the
-- earliest of the partitions' last commits.
CREATE OR REPLACE FUNCTION counterd_fleet_all()
RETURNS TABLE (instance text, host text, pid integer, version text, migration integer, claimed_at timestamptz,
               heartbeat_at timestamptz, live boolean, released boolean, queued_rounds integer, last_commit_at timestamptz)
LANGUAGE plproxy AS $$
    CLUSTER ':cluster'; RUN ON ALL;
    SELECT instance, host, pid, version, migration, claimed_at, heartbeat_at, live, released, queued_rounds, last_commit_at
    FROM counterd_fleet;
$$;

CREATE OR REPLACE VIEW counterd_fleet AS
SELECT DISTINCT ON (f.instance)
       f.instance, f.host, f.pid, f.version, f.migration, f.claimed_at, f.heartbeat_at, f.live, f.released, f.queued_rounds,
       min(f.last_commit_at) OVER (PARTITION BY f.instance) AS last_commit_at
FROM counterd_fleet_all() AS f
ORDER BY f.instance, f.live, f.heartbeat_at;

-- counter_unique_buckets' sketches are of the hll extension's type, so the
-- proxy's database needs the extension too: used where it is installed,
-- created where the server has it and this role may (as on a partition,
-- sql/014_uniques.up.sql). Without it the view is left out (InstallProxy
-- reports it); counter_uniques_since and counter_unique_bucket_sketch_text
-- (text) read the same sketches without it.
DO $do$
DECLARE
    ext_schema text;
BEGIN
    SELECT n.nspname INTO ext_schema
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'hll';
    IF ext_schema IS NULL THEN
        BEGIN
            IF EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'public') THEN
                CREATE EXTENSION hll SCHEMA public;
            ELSE
                CREATE EXTENSION hll;
            END IF;
        EXCEPTION
            WHEN insufficient_privilege OR undefined_file THEN
                RETURN;
            WHEN unique_violation OR duplicate_object THEN
                NULL; -- created concurrently
        END;
        SELECT n.nspname INTO ext_schema
        FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'hll';
    END IF;
    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION counter_unique_buckets_all()
        RETURNS TABLE (key text, width text, bucket_start timestamptz, sketch %I.hll)
        LANGUAGE plproxy AS $$
            CLUSTER ':cluster'; RUN ON ALL;
            SELECT key, width, bucket_start, sketch FROM counter_unique_buckets;
        $$
    $f$, ext_schema);
    CREATE OR REPLACE VIEW counter_unique_buckets AS SELECT * FROM counter_unique_buckets_all();
END
$do$;

-- Exact sets: a set's members are on its key's partition.
CREATE OR REPLACE FUNCTION counter_set_members_of(key text, lim integer, after bytea DEFAULT NULL)
RETURNS TABLE (member bytea)
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; RUN ON hashtext(key); TARGET counter_set_members_of; $$;

CREATE OR REPLACE FUNCTION counter_set_contains(key text, member bytea) RETURNS boolean
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; RUN ON hashtext(key); TARGET counter_set_contains; $$;

-- counter_set_reconcile writes on the key's partition (as_of is the
-- app's snapshot, taken where the app's table is).
CREATE OR REPLACE FUNCTION counter_set_reconcile(key text, members bytea[], as_of timestamptz)
RETURNS TABLE (added bigint, removed bigint)
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; RUN ON hashtext(key); TARGET counter_set_reconcile; $$;
