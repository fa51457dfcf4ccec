-- +goose Up
-- The delivery log's (destination, msg_id) index served two queries: the
-- retry of a destination's failed deliveries, which skips a message with a
-- later attempt (store.FailedDeliveries), and a destination's attempts,
-- newest first (store.ListDispatchAttempts: the console's and the API's
-- destination pages). Its msg_id is a random UUID, so every delivery's row
-- went into a random page of it: the dearest of the log's indexes to keep
-- up. A message's webhook-id follows from its key
-- (envelope.OutboxMsgID), and a copy an operator redelivers keeps both, so
-- the first query now matches the key too and the (key, destination) index
-- serves it; (destination, id) serves the second — rows go in at its right
-- edge, and it gives a destination's attempts newest first without a
-- sort (BENCHMARKS.md, "A sequential index for a random one").
-- Not CONCURRENTLY (see 00010): the build holds off the log's inserts while
-- it reads the table; the dispatchers deliver meanwhile and keep the rows
-- to write later (docs/destinations.md).
SET LOCAL lock_timeout = '10s';
DROP INDEX intake.dispatch_attempts_msg_idx;
CREATE INDEX dispatch_attempts_destination_idx ON intake.dispatch_attempts (destination, id);

-- +goose Down
SET LOCAL lock_timeout = '10s';
DROP INDEX intake.dispatch_attempts_destination_idx;
CREATE INDEX dispatch_attempts_msg_idx ON intake.dispatch_attempts (destination, msg_id);
