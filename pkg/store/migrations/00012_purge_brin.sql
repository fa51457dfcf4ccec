-- +goose Up
-- The purge (store.Purge, retention.*) deletes executions by executed_at and
-- the replay guard's body records by first_seen_at, a batch at a time. Both
-- tables are written in time order, so a BRIN index keeps each batch's
-- search a range read at next to no cost on their inserts (as
-- deliveries_received_brin does for the delivery history). Not
-- CONCURRENTLY, for the reason 00010 gives; a BRIN build is one sequential
-- read of the table.
SET LOCAL lock_timeout = '10s';
CREATE INDEX executions_executed_brin ON intake.executions USING brin (executed_at);
CREATE INDEX body_hashes_first_seen_brin ON intake.body_hashes USING brin (first_seen_at);

-- +goose Down
DROP INDEX intake.body_hashes_first_seen_brin;
DROP INDEX intake.executions_executed_brin;
