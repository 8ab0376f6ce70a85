-- 012_owners: one live daemon per journal instance, and a name for this
-- installation so that a journal can tell which database it belongs to.

-- counterd_installation names this schema's counterd installation. A
-- journal records the id (with the server's system identifier, database
-- and schema) and refuses to replay its rounds into any other.
CREATE TABLE counterd_installation (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX counterd_installation_one ON counterd_installation ((true));
INSERT INTO counterd_installation DEFAULT VALUES;

-- counterd_owners holds, per journal instance, the run that owns it: the
-- generation is that run's fencing token, and adopted lists the earlier
-- generations whose journaled rounds it replays. Rounds of any other
-- generation of the instance are refused (counterd_fence), so a copy of a
-- journal directory can never commit as its live original.
CREATE TABLE counterd_owners (
    instance     text PRIMARY KEY,
    generation   text NOT NULL,
    adopted      text[] NOT NULL DEFAULT '{}',
    host         text NOT NULL,
    dir          text NOT NULL,
    dir_id       text NOT NULL,
    boot_id      text NOT NULL,
    pid          integer NOT NULL,
    claimed_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    released     boolean NOT NULL DEFAULT false
);

-- counterd_fence(lanes) returns true when the round whose lanes these are
-- may be written: its instance has no owner, or the owner is the run that
-- created the round's generation or adopted it. Otherwise it raises
-- SQLSTATE CDF01. Every lane of a call names the same round, and a lane is
-- "instance.generation/lane" ("instance/lane" before generations, which
-- is not fenced). A round statement calls it once, before it moves any
-- watermark.
CREATE FUNCTION counterd_fence(lanes text[]) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
    ident text := split_part(lanes[1], '/', 1);
    inst  text := split_part(ident, '.', 1);
    gen   text := split_part(ident, '.', 2);
    o     counterd_owners%ROWTYPE;
BEGIN
    IF coalesce(gen, '') = '' THEN
        RETURN true;
    END IF;
    SELECT * INTO o FROM counterd_owners WHERE instance = inst;
    IF NOT FOUND OR o.generation = gen OR gen = ANY (o.adopted) THEN
        RETURN true;
    END IF;
    RAISE EXCEPTION 'counterd instance % was taken over by another daemon (pid % on host %, journal %, at %); rounds of generation % are no longer written by this one',
        inst, o.pid, o.host, o.dir, o.claimed_at, gen
        USING ERRCODE = 'CDF01';
END $$;

-- counterd_owner_beat(instance, generation) records that the run of
-- generation is alive and returns true, or returns false if another run
-- owns the instance. Budget leases are renewed and taken through it, so a
-- lease is never extended by a run that lost its instance.
CREATE FUNCTION counterd_owner_beat(p_instance text, p_generation text) RETURNS boolean
LANGUAGE sql VOLATILE AS $$
    WITH beat AS (
        UPDATE counterd_owners SET heartbeat_at = now()
        WHERE instance = p_instance AND generation = p_generation
        RETURNING 1
    )
    SELECT EXISTS (SELECT FROM beat)
        OR NOT EXISTS (SELECT FROM counterd_owners WHERE instance = p_instance)
$$;
