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
// private Postgres (internal/harness/pgcluster) that the harness can stop and start
// — or, with Options.Failover (`--failover`), two: a primary and a streaming
// standby, plus an `intake replayer` for the re-drive. The
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
// # Failover
//
// With Options.Failover every role and the harness reach Postgres through
// one multi-host URL (target_session_attrs=read-write) over a primary and a
// standby cloned from it with pg_basebackup, replicated synchronously
// (synchronous_standby_names on the primary) or, with Options.Async
// (`--async`), asynchronously. The Postgres fault is then a failover:
//  1. the standby is cut off (primary_conninfo emptied: its walreceiver
//     exits and drops whatever its socket held) for 2s, so commits reach
//     the primary only — synchronously they hang waiting for the standby,
//     asynchronously they are acknowledged;
//  2. the primary is killed with SIGKILL, taking those commits with it:
//     synchronously their outcome is unknown to the processors and the
//     inbox must resolve it on redelivery; asynchronously events the
//     processors acknowledged to JetStream are gone from the inbox and only
//     the replayer's re-drive (events on INTAKE_IN the inbox lacks,
//     published again) brings them back;
//  3. the standby is promoted, and the clients find it through the URL;
//  4. later, the old primary rejoins as a standby of the new one
//     (pg_rewind) and, synchronously, becomes its synchronous standby.
//
// A paused standby (SIGSTOP) would not do for step 1: its socket keeps
// taking in the primary's WAL, and it replays it once resumed.
//
// With Options.NoCut (synchronous only) step 1 is left out: the standby
// stays connected, and its walreceiver is paused (SIGSTOP) for the last
// 500ms before the kill — here the pause's property is the point: commits
// wait for its answer while their WAL piles up in its socket, the primary
// dies, their clients see the connection drop, and once resumed (SIGCONT)
// the standby writes that WAL before it is promoted. Those commits landed;
// the retry on the new primary finds their rows and the inbox answers
// Redelivered. The run counts the processors' redelivered outcomes from the
// kill until each committed on the new primary.
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
//   - INTAKE_OUT carries exactly one outbox message id (Nats-Msg-Id) per
//     applied event and none for the others; copies under the same id
//     past the short duplicate window (a relay re-publish; a re-driven
//     event's outbox message, whose id is deterministic) are counted apart
//     and are no violation, as subscribers deduplicate by Nats-Msg-Id (one
//     nats.stream.duplicate_window covers both streams, so INTAKE_OUT
//     cannot be given a long one);
//   - no role exited by itself while running.
//
// With Failover it also reports how many events the re-drive published,
// from intake.replays and from the replayer's intake_redriven_events_total,
// and fails a failover that did not bite, as it would prove nothing: the
// primary wrote no WAL in the 2s before its kill, the processors' logs show
// no database failure ("inbox transaction failed; retrying") from the
// failover's start to 30s after the promotion — the logs, not the metric,
// as a killed processor's counters start again at zero — or,
// asynchronously, nothing was re-driven.
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
