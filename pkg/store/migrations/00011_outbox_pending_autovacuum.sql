-- +goose Up
-- outbox_pending is the one table every event both inserts into and deletes
-- from (the batch transaction adds the id, the processor's marker removes it
-- tens of milliseconds later): a few hundred live rows, and dead ones at the
-- ingest rate. Autovacuum's defaults wait for 20 % of the live rows plus 50
-- to be dead, and then vacuum at a throttled pace; here they are vacuumed at
-- every visit, unthrottled. A visit still comes at most once per
-- autovacuum_naptime (1 minute by default, a server setting), so the table
-- holds up to about a minute of events' dead rows: bounded, and the mark
-- statement reads it through its primary key (store.MarkPublished), so
-- its cost does not follow the dead rows in between.
-- The other hot tables are insert-mostly: deliveries, executions and outbox
-- take one insert per event (outbox rows leave by retention, in bulk), and
-- the inbox row is inserted already processed, updated only by a retry, a
-- replay, a duplicate's delivery count or a stale object version.
-- Autovacuum's insert thresholds serve them; they keep the defaults.
-- A design without churn (pending state dropped in bulk, e.g. partitions
-- truncated in turn) would trade this for a relay that scans partitions;
-- not needed while the dead rows stay bounded (intake bench soak reports
-- them per minute).
ALTER TABLE intake.outbox_pending SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 5000
);

-- +goose Down
ALTER TABLE intake.outbox_pending RESET (
    autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_threshold,
    autovacuum_vacuum_cost_delay,
    autovacuum_analyze_scale_factor,
    autovacuum_analyze_threshold
);
