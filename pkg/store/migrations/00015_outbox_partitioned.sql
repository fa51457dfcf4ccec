-- +goose Up
-- The outbox, partitioned by day of created_at. Published rows leave by
-- age (outbox.retention): a whole day is dropped at once — no delete per
-- row, no dead tuples, no vacuum of what is gone — once every row in it is
-- older than the retention and none is still pending (store.DropOutboxPartitions,
-- run by each processor's relay every minute).
--
-- The rows already here become one partition, outbox_legacy, of every time
-- before the bound 00013 set and 00014 proved, so attaching it reads
-- nothing. Its indexes match the parent's (the event key, created_at), so
-- none is built either: this migration's exclusive lock is held for a few
-- catalog changes, whatever the outbox's size. It goes as one partition
-- once its bound is past the retention.
--
-- The parent has no primary key: a partitioned table's must include the
-- partition key, and a new one on the legacy rows would be an index built
-- under that lock. Each partition has its own on id (UUIDv7, appended in
-- order); an id is unique because it is made unique (the processor's
-- UUIDv7), not because a global index checks it — as it was for the
-- INTAKE_OUT Nats-Msg-Id derived from it.
--
-- Partitions are made ahead (intake.outbox_add_partitions: 7 days here, and
-- by each processor at start and every minute), with no default partition:
-- a default one would have to be read by every later attach, and would make
-- a gap silent.
SET LOCAL lock_timeout = '10s';
-- Bounds are written and read back as text: ISO, in UTC.
SET LOCAL DateStyle = 'ISO, MDY';
SET LOCAL TimeZone = 'UTC';
ALTER TABLE intake.outbox RENAME TO outbox_legacy;
ALTER INDEX intake.outbox_pkey RENAME TO outbox_legacy_pkey;
ALTER INDEX intake.outbox_key_idx RENAME TO outbox_legacy_key_idx;
ALTER INDEX intake.outbox_created_idx RENAME TO outbox_legacy_created_idx;
ALTER SEQUENCE intake.outbox_seq_seq RENAME TO outbox_legacy_seq_seq;
CREATE TABLE intake.outbox (LIKE intake.outbox_legacy
    INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING STORAGE INCLUDING COMPRESSION INCLUDING COMMENTS)
    PARTITION BY RANGE (created_at);
CREATE INDEX outbox_key_idx ON intake.outbox (integration, account, event_id);
CREATE INDEX outbox_created_idx ON intake.outbox (created_at);
SELECT setval(pg_get_serial_sequence('intake.outbox', 'seq'), last_value, is_called) FROM intake.outbox_legacy_seq_seq;
-- A partition may not have an identity of its own (PostgreSQL 17 refuses
-- the attach): the parent's numbers every new row.
ALTER TABLE intake.outbox_legacy ALTER COLUMN seq DROP IDENTITY;
-- +goose StatementBegin
DO $$
DECLARE
    bound timestamptz;
BEGIN
    SELECT substring(pg_get_constraintdef(oid) FROM '''([^'']*)''')::timestamptz INTO STRICT bound
    FROM pg_constraint WHERE conrelid = 'intake.outbox_legacy'::regclass AND conname = 'outbox_legacy_until';
    EXECUTE format('ALTER TABLE intake.outbox ATTACH PARTITION intake.outbox_legacy FOR VALUES FROM (MINVALUE) TO (%L)', bound);
END $$;
-- +goose StatementEnd

-- The outbox's partitions and the time each ends (exclusive).
-- +goose StatementBegin
CREATE FUNCTION intake.outbox_partitions() RETURNS TABLE (part regclass, until timestamptz)
LANGUAGE sql STABLE SET DateStyle = 'ISO, MDY' SET TimeZone = 'UTC' AS $$
    SELECT c.oid::regclass, (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'intake.outbox'::regclass
$$;
-- +goose StatementEnd

-- Makes a partition for each UTC day from the end of the last one (or the
-- day of at) through days after at, and returns how many it made. A new
-- day is created apart and attached (ATTACH takes a lock that inserts do
-- not wait for; CREATE … PARTITION OF would take an exclusive one), with a
-- CHECK of its range so the attach reads nothing.
-- +goose StatementBegin
CREATE FUNCTION intake.outbox_add_partitions(at timestamptz, days integer) RETURNS integer
LANGUAGE plpgsql SET DateStyle = 'ISO, MDY' SET TimeZone = 'UTC' AS $$
DECLARE
    day  timestamptz := date_trunc('day', at, 'UTC');
    last timestamptz := date_trunc('day', at, 'UTC') + make_interval(hours => 24 * (days + 1));
    name text;
    made integer := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('intake.outbox partitions'));
    SELECT greatest(day, max(p.until)) INTO day FROM intake.outbox_partitions() p;
    WHILE day < last LOOP
        name := 'outbox_p' || to_char(day AT TIME ZONE 'UTC', 'YYYYMMDD');
        EXECUTE format('CREATE TABLE intake.%I (LIKE intake.outbox INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION, '
            'PRIMARY KEY (id), CONSTRAINT %I CHECK (created_at >= %L AND created_at < %L))',
            name, name || '_range', day, day + interval '24 hours');
        EXECUTE format('ALTER TABLE intake.outbox ATTACH PARTITION intake.%I FOR VALUES FROM (%L) TO (%L)',
            name, day, day + interval '24 hours');
        made := made + 1;
        day := day + interval '24 hours';
    END LOOP;
    RETURN made;
END $$;
-- +goose StatementEnd

-- Drops each partition that ends at or before cutoff and holds no pending
-- row, and returns them with their row count (the planner's estimate);
-- dry_run only returns them. The caller sets lock_timeout: a DROP takes an
-- exclusive lock on the parent.
-- +goose StatementBegin
CREATE FUNCTION intake.outbox_drop_partitions(cutoff timestamptz, dry_run boolean DEFAULT false) RETURNS TABLE (dropped text, est_rows bigint)
LANGUAGE plpgsql SET DateStyle = 'ISO, MDY' SET TimeZone = 'UTC' AS $$
DECLARE
    p       record;
    pending boolean;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('intake.outbox partitions'));
    FOR p IN SELECT x.part, x.until FROM intake.outbox_partitions() x WHERE x.until <= cutoff ORDER BY x.until LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM intake.outbox_pending q JOIN %s o ON o.id = q.id)', p.part) INTO pending;
        CONTINUE WHEN pending;
        dropped := p.part::text;
        SELECT greatest(c.reltuples, 0)::bigint INTO est_rows FROM pg_class c WHERE c.oid = p.part;
        IF NOT dry_run THEN
            EXECUTE format('DROP TABLE %s', p.part);
        END IF;
        RETURN NEXT;
    END LOOP;
END $$;
-- +goose StatementEnd

SELECT intake.outbox_add_partitions(now(), 7);

-- +goose Down
SET LOCAL lock_timeout = '10s';
DROP FUNCTION intake.outbox_drop_partitions(timestamptz, boolean);
DROP FUNCTION intake.outbox_add_partitions(timestamptz, integer);
DROP FUNCTION intake.outbox_partitions();
ALTER TABLE intake.outbox RENAME TO outbox_partitioned;
ALTER INDEX intake.outbox_key_idx RENAME TO outbox_partitioned_key_idx;
ALTER INDEX intake.outbox_created_idx RENAME TO outbox_partitioned_created_idx;
ALTER SEQUENCE intake.outbox_seq_seq RENAME TO outbox_partitioned_seq_seq;
CREATE TABLE intake.outbox (LIKE intake.outbox_partitioned
    INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING STORAGE INCLUDING COMPRESSION INCLUDING COMMENTS);
INSERT INTO intake.outbox OVERRIDING SYSTEM VALUE SELECT * FROM intake.outbox_partitioned;
SELECT setval(pg_get_serial_sequence('intake.outbox', 'seq'), last_value, is_called) FROM intake.outbox_partitioned_seq_seq;
DROP TABLE intake.outbox_partitioned;
ALTER TABLE intake.outbox ADD PRIMARY KEY (id);
CREATE INDEX outbox_key_idx ON intake.outbox (integration, account, event_id);
CREATE INDEX outbox_created_idx ON intake.outbox (created_at);
