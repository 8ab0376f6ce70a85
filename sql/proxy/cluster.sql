-- The read interface on a PL/Proxy cluster's proxy database: the same
-- names as on one database (docs/sql.md), as PL/Proxy functions over the
-- partitions' own. counterd migrate (and counterd at start) runs this in
-- the DATABASE_URL schema with COUNTERD_CLUSTER set, with :cluster
-- replaced by the cluster's name (a plain identifier, checked). Every
-- statement replaces what was there, so running it again is harmless.
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

CREATE OR REPLACE FUNCTION counter_totals_all() RETURNS TABLE (key text, total bigint)
LANGUAGE plproxy AS $$ CLUSTER ':cluster'; RUN ON ALL; SELECT key, total FROM counter_totals; $$;

CREATE OR REPLACE VIEW counter_totals AS SELECT * FROM counter_totals_all();
