package inbox

// Status is an inbox row's status (intake.inbox.status). A row is written
// in its final status by the transaction that applies or refuses the event,
// so there is no in-flight status.
type Status string

// Inbox statuses.
const (
	StatusProcessed   Status = "processed"   // the handler ran and committed
	StatusStale       Status = "stale"       // an older object version; not applied
	StatusFailed      Status = "failed"      // the handler failed for good (permanent or out of deliveries)
	StatusQuarantined Status = "quarantined" // the handler asked an operator to look first
)

// Retryable reports whether an exact replay runs the handler again: the
// event never applied, because its handler failed.
func (s Status) Retryable() bool { return s == StatusFailed || s == StatusQuarantined }

// Mode is how a handler run came about (intake.executions.mode).
type Mode string

// Execution modes.
const (
	ModeOriginal  Mode = "original"  // the first application of the event
	ModeRetry     Mode = "retry"     // an exact replay of a failed or quarantined event
	ModeReexecute Mode = "reexecute" // an operator asked for the handler to run again
)

// Guarded reports whether a run in this mode passes the object-version
// guard first. A re-execution is asked for explicitly: it does not move the
// object's version and is never refused as stale.
func (m Mode) Guarded() bool { return m != ModeReexecute }

// ReplayMode says whether and how the replayer republished a message (the
// Intake-Replay-Mode header); ReplayNone for a delivery from ingress.
type ReplayMode string

// Replay modes of a message.
const (
	ReplayNone      ReplayMode = ""
	ReplayExact     ReplayMode = "exact"     // the inbox decides, as for any delivery
	ReplayReexecute ReplayMode = "reexecute" // the handler runs again, whatever the row's status
)

// Valid reports whether m is one of the replay modes.
func (m ReplayMode) Valid() bool {
	return m == ReplayNone || m == ReplayExact || m == ReplayReexecute
}

// Outcome is what the inbox did with one message. String gives the label
// of the processor's outcome metric.
type Outcome int

// Outcomes.
const (
	New         Outcome = iota + 1 // the claim inserted the row: applied for the first time
	Duplicate                      // same payload again in another stream message; counted
	Redelivered                    // the row's own stream message again (a lost ack); nothing
	Conflict                       // same key, other payload; recorded, nothing applied
	Stale                          // older object version (after the guard); recorded, not applied
	Replayed                       // exact replay of a settled event; nothing
	Retried                        // exact replay of a failed or quarantined event; applied
	Reexecuted                     // explicit re-execution; applied again
)

// String returns the outcome's metric label.
func (o Outcome) String() string {
	switch o {
	case New:
		return "new"
	case Duplicate:
		return "duplicate"
	case Redelivered:
		return "redelivered"
	case Conflict:
		return "conflict"
	case Stale:
		return "stale"
	case Replayed:
		return "replayed"
	case Retried:
		return "retried"
	case Reexecuted:
		return "reexecuted"
	}
	return "unknown"
}
