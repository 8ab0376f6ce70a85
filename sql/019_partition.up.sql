-- counterd_partition records, in a database that is a partition of a
-- PL/Proxy cluster (COUNTERD_CLUSTER), which partition of how many it is,
-- the first time counterd runs on it. Keys go to partition
-- hashtext(key) & (count-1): a declaration whose count or order changed
-- would read and write them on other partitions, so counterd refuses to
-- start on one that no longer matches.
CREATE TABLE counterd_partition (
    one         boolean     PRIMARY KEY DEFAULT true CHECK (one),
    idx         integer     NOT NULL CHECK (idx >= 0),
    count       integer     NOT NULL CHECK (count > idx),
    recorded_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE counterd_partition IS
    'which partition of how many this database is in its PL/Proxy cluster, recorded when counterd first ran on it; delete the row only after moving the data for a new declaration (docs/scaling.md).';
