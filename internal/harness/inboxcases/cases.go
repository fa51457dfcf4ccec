// Package inboxcases is the one table of inbox decisions: an inbox row's
// state and a message, with what the inbox decides. Three tests read it —
// inbox.Decide's own, the processor's (real Postgres and NATS: the row is
// put in its state, the message published, the outcome observed) and the
// replayer's dry run (the same rows; the predicted outcome checked) — so
// the processor and the dry run are held to the same answers.
package inboxcases

import "github.com/intakehq/intake/pkg/inbox"

// NoRow is a Case's Row when the event has no inbox row: the claim inserts.
const NoRow inbox.Status = ""

// Case is one row state × message.
type Case struct {
	Name string
	// Row is the status of the event's inbox row before the message, or
	// NoRow.
	Row inbox.Status
	// Replay is the message's replay mode: ReplayNone for a delivery from
	// ingress, else a copy the replayer published.
	Replay inbox.ReplayMode
	// OtherPayload: the message's payload differs from the row's.
	OtherPayload bool
	// RowsMessage: the message is the stream message that claimed the row,
	// delivered again (its ack was lost). A replay copy never is.
	RowsMessage bool
	// Executed: the message is a replay copy that already ran the handler,
	// delivered again after its commit (its ack was lost): an execution
	// records its stream sequence.
	Executed bool

	// Want is what the inbox decides.
	Want inbox.Decision
	// DryRun is what a dry run of the replay reports for the event (the
	// replayer's would_* outcome); "" when the message is no replay copy,
	// which a dry run cannot predict.
	DryRun string
}

// Row and message payload hashes and stream sequences of Inputs.
const (
	RowSHA   = "aa"
	OtherSHA = "bb"
	RowSeq   = 7
	MsgSeq   = 9
	NoSeq    = 0 // a dry run's copy, not yet published
)

func run(o inbox.Outcome, m inbox.Mode) inbox.Decision {
	return inbox.Decision{Outcome: o, Run: true, Mode: m}
}

// settle is d for a failed or quarantined row, which a run makes processed.
func settle(d inbox.Decision) inbox.Decision {
	d.Settles = true
	return d
}

func refuse(o inbox.Outcome) inbox.Decision { return inbox.Decision{Outcome: o} }

var (
	processed   = inbox.StatusProcessed
	stale       = inbox.StatusStale
	failed      = inbox.StatusFailed
	quarantined = inbox.StatusQuarantined
	none        = inbox.ReplayNone
	exact       = inbox.ReplayExact
	reexecute   = inbox.ReplayReexecute
)

// Cases is the table.
var Cases = []Case{
	{Name: "first delivery", Row: NoRow, Replay: none, Want: run(inbox.New, inbox.ModeOriginal)},
	{Name: "exact replay, never processed", Row: NoRow, Replay: exact, Want: run(inbox.New, inbox.ModeOriginal), DryRun: "would_apply"},
	{Name: "reexecute, never processed", Row: NoRow, Replay: reexecute, Want: run(inbox.New, inbox.ModeReexecute), DryRun: "would_apply"},

	{Name: "processed, provider retry", Row: processed, Replay: none, Want: refuse(inbox.Duplicate)},
	{Name: "processed, lost ack", Row: processed, Replay: none, RowsMessage: true, Want: refuse(inbox.Redelivered)},
	{Name: "processed, other payload", Row: processed, Replay: none, OtherPayload: true, Want: refuse(inbox.Conflict)},
	{Name: "processed, exact replay", Row: processed, Replay: exact, Want: refuse(inbox.Replayed), DryRun: "would_deduplicate"},
	{Name: "processed, exact replay of other payload", Row: processed, Replay: exact, OtherPayload: true, Want: refuse(inbox.Conflict), DryRun: "would_conflict"},
	{Name: "processed, reexecute", Row: processed, Replay: reexecute, Want: run(inbox.Reexecuted, inbox.ModeReexecute), DryRun: "would_apply"},
	// A dry run predicts for a fresh copy; the table's processor test
	// delivers this one again after it ran.
	{Name: "processed, reexecute copy delivered again after its commit", Row: processed, Replay: reexecute, Executed: true, Want: refuse(inbox.Redelivered), DryRun: "would_apply"},
	{Name: "processed, reexecute of other payload", Row: processed, Replay: reexecute, OtherPayload: true, Want: refuse(inbox.Conflict), DryRun: "would_conflict"},

	{Name: "stale, provider retry", Row: stale, Replay: none, Want: refuse(inbox.Duplicate)},
	{Name: "stale, other payload", Row: stale, Replay: none, OtherPayload: true, Want: refuse(inbox.Conflict)},
	{Name: "stale, exact replay", Row: stale, Replay: exact, Want: refuse(inbox.Replayed), DryRun: "would_deduplicate"},
	{Name: "stale, reexecute", Row: stale, Replay: reexecute, Want: run(inbox.Reexecuted, inbox.ModeReexecute), DryRun: "would_apply"},

	{Name: "failed, provider retry", Row: failed, Replay: none, Want: refuse(inbox.Duplicate)},
	{Name: "failed, lost ack", Row: failed, Replay: none, RowsMessage: true, Want: refuse(inbox.Redelivered)},
	{Name: "failed, exact replay", Row: failed, Replay: exact, Want: settle(run(inbox.Retried, inbox.ModeRetry)), DryRun: "would_retry"},
	{Name: "failed, exact replay of other payload", Row: failed, Replay: exact, OtherPayload: true, Want: refuse(inbox.Conflict), DryRun: "would_conflict"},
	{Name: "failed, reexecute", Row: failed, Replay: reexecute, Want: settle(run(inbox.Reexecuted, inbox.ModeReexecute)), DryRun: "would_apply"},
	{Name: "quarantined, reexecute", Row: quarantined, Replay: reexecute, Want: settle(run(inbox.Reexecuted, inbox.ModeReexecute)), DryRun: "would_apply"},

	{Name: "quarantined, provider retry", Row: quarantined, Replay: none, Want: refuse(inbox.Duplicate)},
	{Name: "quarantined, exact replay", Row: quarantined, Replay: exact, Want: settle(run(inbox.Retried, inbox.ModeRetry)), DryRun: "would_retry"},
	{Name: "quarantined, reexecute of other payload", Row: quarantined, Replay: reexecute, OtherPayload: true, Want: refuse(inbox.Conflict), DryRun: "would_conflict"},
}

// Inputs are Decide's arguments for c: a row with RowSHA at RowSeq, a
// message at MsgSeq (RowSeq when it is the row's own message).
func (c Case) Inputs() (row inbox.Row, found bool, msg inbox.Message) {
	msg = inbox.Message{PayloadSHA256: RowSHA, StreamSeq: MsgSeq, ReplayMode: c.Replay, Executed: c.Executed}
	if c.OtherPayload {
		msg.PayloadSHA256 = OtherSHA
	}
	if c.Row == NoRow {
		return inbox.Row{}, false, msg
	}
	row = inbox.Row{PayloadSHA256: RowSHA, StreamSeq: RowSeq, Status: c.Row}
	if c.RowsMessage {
		msg.StreamSeq = RowSeq
	}
	return row, true, msg
}
