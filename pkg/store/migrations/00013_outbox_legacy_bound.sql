-- +goose Up
-- The outbox becomes partitioned by day (00015; docs/retention.md), so that
-- retention drops a whole day instead of deleting its rows one by one. The
-- rows already there become one partition, "outbox_legacy", of every time
-- before a bound at least a day ahead; attaching them needs Postgres to
-- know that no row is at or past the bound. This migration states it, NOT
-- VALID: checked for new rows from now on, the old ones are not read (a
-- brief exclusive lock, no scan). 00014 reads them, without blocking
-- writes; 00015 then attaches the table without a scan. Three migrations
-- because each runs in its own transaction: a validation inside the swap's
-- would read the whole outbox while holding the swap's exclusive lock.
SET LOCAL lock_timeout = '10s';
-- The bound is read back as text by 00015: ISO, in UTC.
SET LOCAL DateStyle = 'ISO, MDY';
SET LOCAL TimeZone = 'UTC';
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER TABLE intake.outbox ADD CONSTRAINT outbox_legacy_until CHECK (created_at < %L) NOT VALID',
        date_trunc('day', now(), 'UTC') + interval '48 hours');
END $$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE intake.outbox DROP CONSTRAINT IF EXISTS outbox_legacy_until;
