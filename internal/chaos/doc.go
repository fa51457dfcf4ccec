// Package chaos is Intake's chaos and soak harness (`intake bench chaos`,
// `make chaos`): it proves, on this machine, that crashes, restarts and
// concurrent duplicates produce zero duplicate business effects and lose no
// acknowledged event.
//
// # What runs
//
// Every piece is a separate OS process on loopback, started from one intake
// binary: NATS (`intake nats`, the embedded nats-server in a process of its
// own — one node, or three in a cluster with R3 streams), 2+ `intake
// ingress`, 2+ `intake bench chaos-processor` (the production processor with the
// harness's business-row handler and a crash switch), and a
// private Postgres (internal/pgcluster) that the harness can stop and start. The
// processors run Effects, a domain handler that writes one row per applied
// event into chaos.effects in the inbox transaction and forwards the event
// to INTAKE_OUT.
//
// # What happens
//
// The load generator sends N distinct events signed like a Standard Webhooks
// provider (provider.Sign). Every event is delivered 2 times in parallel to
// different ingresses; a share 3 times; a share once more after the
// JetStream duplicate window (set short, 2s, so only the inbox can stop it);
// a share is followed by another payload under the same id (a conflict); a
// share are versions of an object sent out of order (ingress extracts
// object.id and object.version, the processor's ordering guard judges).
// Every attempt without a 2xx is retried with backoff until it gets one, as
// providers do, and a share of attempts is sent and then dropped without
// reading the answer (a lost response).
//
// Meanwhile, at moments chosen by progress: processors are killed with
// SIGKILL — half at a random moment, half right after a commit and before
// its acks (CrashAfterCommitOnSignal) — and started again; NATS is killed
// with SIGKILL and restarted (in a cluster: the INTAKE_IN stream leader);
// Postgres is stopped and started.
//
// # The verdict
//
// After the load, the faults and the drain, the verdict compares what the
// client sent and saw with evidence Intake's own counters play no part in:
//   - chaos.effects holds exactly one row per event, or none for an event
//     the inbox recorded stale — never two (duplicate effects), never none
//     for an acknowledged event (lost);
//   - INTAKE_IN holds every acknowledged event (nothing lost by the stream),
//     and the copies past the stream's dedup show what only the inbox stopped;
//   - every injected conflict's other payload is in intake.conflicts, and no
//     conflict is recorded for an event sent with one payload;
//   - per object, versions were applied in increasing order, the newest was
//     applied, and the others are stale in the inbox;
//   - INTAKE_OUT carries exactly one outbox message (by Nats-Msg-Id) per
//     applied event and none for the others;
//   - no role exited by itself while running.
//
// The negative control (Options.Control, `--control`) runs the same harness
// against processors that write the business row outside the inbox
// transaction (EffectsOutsideTx); its verdict must be FAIL, or a PASS
// proves nothing.
//
// Latency is measured from the client's first 2xx for an event to the
// inbox's processed_at (the start of the committing transaction, so it can
// be slightly early; negatives count as zero).
package chaos
