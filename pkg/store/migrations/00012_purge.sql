-- +goose Up
-- The purge (store.Purge, retention.*, docs/retention.md).
--
-- Its steps walk each table's time column in order from where the last
-- batch stopped, so each needs a btree on it. BRIN would cost less to
-- keep, but a purge that deletes old rows lets new ones fill the freed
-- pages, and a BRIN range only ever widens: after one retention period
-- each range spans everything and a BRIN "range read" is the whole table.
-- An event's delivery history and executions go with its inbox row, by
-- key; what is left to find by time is the receipts of deliveries the
-- inbox never held (answered duplicate or unavailable): a partial index
-- holds only those, so the accepted delivery every event writes pays
-- nothing for it (a full one cost the processor about 7 %). The replay
-- guard's records are written by guarded integrations only.
--
-- The replayer's failed/quarantined gauges count by integration: a partial
-- index holds only those rows, so a processed event's insert pays nothing.
--
-- purge_lease is the one runner's lease: a row with an expiry renewed
-- between batches, rather than a session advisory lock, so it holds behind
-- a transaction-mode pooler too.
--
-- Not CONCURRENTLY, for the reason 00010 gives: the builds hold off
-- inserts into these tables while they read and sort them; see the upgrade
-- notes in CHANGELOG.md.
SET LOCAL lock_timeout = '10s';
CREATE INDEX deliveries_unclaimed_idx ON intake.deliveries (received_at) WHERE answer <> 'accepted';
CREATE INDEX body_hashes_first_seen_idx ON intake.body_hashes (first_seen_at);
CREATE INDEX inbox_failed_idx ON intake.inbox (integration, status) WHERE status IN ('failed', 'quarantined');
CREATE TABLE intake.purge_lease (
    one        boolean     PRIMARY KEY DEFAULT true CHECK (one),
    holder     text        NOT NULL,
    expires_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE intake.purge_lease;
DROP INDEX intake.inbox_failed_idx;
DROP INDEX intake.body_hashes_first_seen_idx;
DROP INDEX intake.deliveries_unclaimed_idx;
