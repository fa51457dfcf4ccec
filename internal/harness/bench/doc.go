// Package bench is the `intake bench` performance harness. It measures
// Intake's stages against limits measured in the same run, with the same
// load generator and payloads, and reports ratios — absolute numbers on a
// shared 2-core machine are noise, ratios side by side are not.
//
// References: (a) a bare net/http handler that reads the body and answers
// 200; (b) raw JetStream publish, sync and async, with Nats-Msg-Id, to a
// stream configured like INTAKE_IN; (c) the batched-insert limit of the
// local Postgres: the processor's inbox, execution and outbox writes in
// batches of 256, no JetStream; (d) the same writes one transaction per
// event (the naive receiver); (e) the processor's JetStream work without
// Postgres: (b)'s messages fetched 256 at a time, each published to a
// stream configured like INTAKE_OUT, PubAcks awaited, then acked; (f) (a)
// that publishes the body and answers after the PubAck, nothing else — the
// durable boundary with none of Intake's code; (c+e) (c)'s rows and (e)'s
// JetStream work in one loop, as the processor does them, nothing else.
// Two ratios are shown against costs added — ingress against (a) and (b
// sync), the processor against (c) and (e) — since on a host whose cores
// NATS, Postgres and Intake share, those costs add; and ingress / (f) and
// processor / (c+e), Intake's own share.
//
// Intake: `intake ingress` and `intake processor` run as child processes
// (so their peak RSS is their own), against an embedded nats-server and a
// private, durable (fsync on) Postgres cluster started by the harness.
//
// While the processor drains, Postgres's cost per event is measured too
// (pgcost.go): WAL bytes, CPU of all postgres processes, and per table
// live rows, index entries and bytes.
//
// Three comparisons run instead of the stages, each on its own flag:
// --durability (durability.go) sets ingress and raw publish against
// JetStream with per-write fsync beside the default; --replication
// (replication.go) sets the processor's Postgres writes against a
// synchronous standby beside an asynchronous one; --processors 1,2,4
// (procs.go) drains the same backlog with each count of processor
// processes. --system (system.go) and --dispatch (dispatch.go) are runs
// of their own too: the whole pipeline as `intake dev` deploys it, and
// `intake dispatcher` against a bare HTTP client posting to the same
// receiver from a process of its own (bareclient.go), then a destination held down and the dispatcher killed, judged
// from the receiver's record.
package bench
