-- +goose Up
-- The delivery log's (destination, msg_id) index served one query: the
-- retry of a destination's failed deliveries, which skips a message with a
-- later attempt (store.FailedDeliveries). A message's webhook-id follows from
-- its key (envelope.OutboxMsgID), and a copy an operator redelivers keeps
-- both the id and the key, so that query now matches the key too and the
-- (key, destination) index serves it. Every delivery's row then costs
-- Postgres one index entry fewer (BENCHMARKS.md, "One index fewer").
SET LOCAL lock_timeout = '10s';
DROP INDEX intake.dispatch_attempts_msg_idx;

-- +goose Down
CREATE INDEX dispatch_attempts_msg_idx ON intake.dispatch_attempts (destination, msg_id);
