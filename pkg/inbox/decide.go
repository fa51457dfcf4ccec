package inbox

// Row is what the decision needs of an existing inbox row.
type Row struct {
	PayloadSHA256 string
	StreamSeq     uint64 // the INTAKE_IN message that claimed the row
	Status        Status
}

// Message is what the decision needs of a message on INTAKE_IN.
type Message struct {
	PayloadSHA256 string
	// StreamSeq is the message's sequence in INTAKE_IN; 0 for a replay copy
	// not yet published (a dry run's prediction).
	StreamSeq  uint64
	ReplayMode ReplayMode
	// Executed: the replay this copy belongs to already ran the handler
	// for the event — this copy delivered again after its commit (its ack
	// was lost), or another copy of the same replay: a replay runs a key at
	// most once. The row cannot tell, as it keeps the sequence of the
	// event's first message; the executions do.
	Executed bool
}

// Decision is what the inbox does with one message.
type Decision struct {
	Outcome Outcome
	// Run: the handler runs, in Mode. Mode is "" when it does not.
	Run  bool
	Mode Mode
	// Settles: the row is failed or quarantined and a run that succeeds
	// makes it processed, so that a later exact replay deduplicates
	// instead of applying the event once more.
	Settles bool
}

// Decide decides a message against its inbox row. found is false when the
// message's claim inserted the row (there was none): the event is new. Else
// row is the existing row, locked by the claim.
//
// Decide is the first of two steps. A decision that runs the handler in a
// Guarded mode then passes the object-version guard, which needs the
// database: an older version turns it into Stale and nothing runs. The
// replayer's dry run predicts the first step only.
func Decide(row Row, found bool, msg Message) Decision {
	run := func(o Outcome, m Mode) Decision { return Decision{Outcome: o, Run: true, Mode: m} }
	switch {
	case !found && msg.ReplayMode == ReplayReexecute:
		return run(New, ModeReexecute)
	case !found:
		return run(New, ModeOriginal)
	case row.PayloadSHA256 != msg.PayloadSHA256:
		return Decision{Outcome: Conflict}
	case msg.Executed:
		return Decision{Outcome: Redelivered}
	case msg.ReplayMode == ReplayReexecute:
		d := run(Reexecuted, ModeReexecute)
		d.Settles = row.Status.Retryable()
		return d
	case msg.ReplayMode == ReplayExact && row.Status.Retryable():
		d := run(Retried, ModeRetry)
		d.Settles = true
		return d
	case msg.ReplayMode == ReplayExact:
		return Decision{Outcome: Replayed}
	case row.StreamSeq == msg.StreamSeq:
		return Decision{Outcome: Redelivered}
	default:
		// Counted (delivery_count, last_received_at) through the
		// delivery history.
		return Decision{Outcome: Duplicate}
	}
}
