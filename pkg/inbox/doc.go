// Package inbox is the inbox's decision, written once: given the inbox row
// a message's claim found (or that the claim inserted a new one) and the
// message itself, Decide says what happens — an Outcome, whether the
// handler runs, and in which execution Mode.
//
// Two components must agree on that answer: the processor, which acts on
// it inside the batch transaction, and the replayer's dry run, which
// predicts it for a replay copy before anything is published. Both call
// Decide, and one table of cases (internal/harness/inboxcases) tests Decide, the
// processor and the dry run alike.
//
// The package is pure: no I/O, no clock. It also owns the typed values that
// flow through the decision and are stored or sent as strings: the inbox
// Status (intake.inbox.status), the execution Mode (intake.executions.mode,
// processor.Event.Mode), the ReplayMode of a message (the Intake-Replay-Mode
// header) and the Outcome (the processor's outcome metric label).
package inbox
