// Package replayer is the operator side of Intake: the /api/v1 API behind
// bearer tokens, and the engine that republishes events.
//
// A replay resolves its selector (scoped keys, an INTAKE_IN sequence or time
// range, an inbox status, filters) into items once, when it is created, and
// records them with the audit row in intake.replays / intake.replay_items.
// The engine then republishes each item's original raw message from
// INTAKE_IN to its subject, with Nats-Msg-Id "replay:{replay_id}:{key}" and
// the Intake-Replay-Id / Intake-Replay-Mode headers, paced at the replay's
// rate, waiting for every PubAck. The inbox decides what a copy does:
// exact replays of settled events apply nothing, of failed ones retry the
// handler; re-executions run it again under a new execution. Once the
// replay has finished, Results reads back what the processor did with each
// copy (executions under the replay's id, rejections and conflicts at the
// copy's sequence, the inbox row) beside what the plan predicted.
//
// A redelivery is the same machinery pointed at INTAKE_OUT (or the outbox):
// processed messages published again for a subscriber that lost data.
//
// Resume without double publishing: a replay is published by whichever
// replayer holds its Postgres advisory lock. Progress (items published, the
// sequence they landed at) is recorded per batch on that lock's connection.
// A replayer that takes over a replay first scans the target stream after
// the last recorded position for copies carrying the replay's id — acked
// but not yet recorded when the previous replayer died — and marks them, so
// it republishes nothing twice even beyond the duplicate window (which,
// through the per-replay message id, is a second line of defence).
package replayer
