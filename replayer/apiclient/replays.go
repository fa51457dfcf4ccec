package apiclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/intakehq/intake/pkg/inbox"
)

// Replay is a replay or redelivery (or the dry run of one): the audit
// record and its progress. POST /api/v1/replays and /api/v1/redeliveries
// answer one, GET /api/v1/replays/{id} reads one.
type Replay struct {
	ID          string    `json:"id"`
	RequestedBy string    `json:"requested_by"` // the token's name
	CreatedAt   time.Time `json:"created_at"`
	// Selector is the request's selector as recorded; a redelivery's also
	// names its source.
	Selector json.RawMessage `json:"selector"`
	Mode     string          `json:"mode"` // exact, reexecute, or ReplayRedeliver
	Reason   string          `json:"reason"`
	DryRun   bool            `json:"dry_run"`
	Rate     int             `json:"rate"` // events per second
	// AdmitReplayedBodies: the request's admit_replayed_bodies (absent
	// when false).
	AdmitReplayedBodies bool   `json:"admit_replayed_bodies,omitempty"`
	State               string `json:"state"`
	Matched             int64  `json:"matched"`
	// Published counts the copies published so far; Duplicates those the
	// stream's duplicate window dropped.
	Published  int64 `json:"published"`
	Duplicates int64 `json:"duplicates"`
	// Outcomes counts the selected events by predicted outcome
	// (would_deduplicate, would_retry, … and OutcomeMissing); Counts splits
	// them by tenant, integration and type; Sample names some keys.
	Outcomes map[string]int64 `json:"outcomes"`
	Counts   []OutcomeCount   `json:"counts"`
	Sample   []string         `json:"sample"`
	// UnknownKeys are the selected keys with no inbox row and no refusal
	// record, so nothing to replay by key (a typo, another account, an
	// event that never arrived, or one never processed: a range replay
	// finds its message), at most 100; counted in Outcomes as missing. Only on the answer to the POST that planned the replay or
	// dry run.
	UnknownKeys []string   `json:"unknown_keys,omitempty"`
	CancelledBy *string    `json:"cancelled_by,omitempty"`
	Error       *string    `json:"error,omitempty"`
	FinishedAt  *time.Time `json:"finished_at"`
	// ApprovedBy and ApprovedAt: the operator (another than RequestedBy)
	// who approved a replay that was ReplayAwaitingApproval, and when.
	ApprovedBy *string    `json:"approved_by,omitempty"`
	ApprovedAt *time.Time `json:"approved_at,omitempty"`
	// Results say what became of the published copies, beside Outcomes'
	// prediction: GET /api/v1/replays/{id} of a finished replay (done,
	// failed or cancelled; exact or reexecute, not a dry run) only; absent
	// elsewhere.
	Results *ReplayResults `json:"results,omitempty"`
}

// ReplayResults are what the processor did with a replay's copies, read
// from its records when the replay is read: executions under the replay's
// id (processed), rejections and conflict records at a copy's sequence,
// and the inbox row of a copy the processor settled without running the
// handler (failed_again, deduplicated, stale). A copy above the processor
// consumer's ack floor is in_flight: still being tried.
type ReplayResults struct {
	// Counts are the items by result: processed, failed_again,
	// deduplicated, stale, rejected, conflict, in_flight, unpublished,
	// missing, no_record.
	Counts map[string]int64 `json:"counts"`
	// ByPrediction splits them by the dry run's predicted outcome.
	ByPrediction []ResultCount `json:"by_prediction"`
	// Settled is the ack floor the results were judged against.
	Settled uint64 `json:"settled"`
}

// ResultCount is the number of a replay's items with one predicted outcome
// and one result.
type ResultCount struct {
	Predicted string `json:"predicted"`
	Result    string `json:"result"`
	Count     int64  `json:"count"`
}

// Results of a replay's copies (ReplayResults.Counts) that a CLI or script
// acts on.
const (
	ResultProcessed    = "processed"
	ResultFailedAgain  = "failed_again"
	ResultDeduplicated = "deduplicated"
	ResultRejected     = "rejected"
	ResultInFlight     = "in_flight"
)

// Replay states, modes and outcomes the CLI acts on (the replayer writes
// the values of intake.replays as they are).
const (
	// ReplayAwaitingApproval: a re-execution above
	// api.replays.reexecute_approval_above events, recorded, publishing
	// nothing until another operator approves it (ApproveReplay).
	ReplayAwaitingApproval = "awaiting_approval"
	ReplayRunning          = "running"
	ReplayDone             = "done"
	ReplayFailed           = "failed"
	ReplayCancelled        = "cancelled"
	// ReplayRedeliver is the mode of a redelivery.
	ReplayRedeliver = "redeliver"
	// OutcomeMissing: the event's source message is gone; it is not
	// published.
	OutcomeMissing = "missing"
	// OutcomeWouldRefuseReplayedBody: the event has no inbox row and its
	// body is the replay guard's under another key: published, the copy is
	// refused again (replayed_body) unless the replay admits replayed
	// bodies.
	OutcomeWouldRefuseReplayedBody = "would_refuse_replayed_body"
)

// Publishable is the number of selected events the replay publishes: those
// with a source message.
func (r Replay) Publishable() int64 { return r.Matched - r.Outcomes[OutcomeMissing] }

// OutcomeCount is the number of selected events of one tenant, integration
// and type with one predicted outcome.
type OutcomeCount struct {
	Tenant      string `json:"tenant"`
	Integration string `json:"integration"`
	EventType   string `json:"event_type"`
	Outcome     string `json:"outcome"`
	Count       int64  `json:"count"`
}

// ReplayPage is GET /api/v1/replays: the audit log (redeliveries included,
// dry runs only when asked for), newest first.
type ReplayPage struct {
	Replays    []Replay `json:"replays"`
	NextCursor string   `json:"next_cursor,omitempty"`
}

// SeqRange is an inclusive range of stream sequences; To 0 means "to the
// end of the stream as it is when the replay is created".
type SeqRange struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to,omitempty"`
}

// Selector says which events a replay republishes. The source is, in order
// of precedence:
//   - a stream range (stream_seq and/or since/until, INTAKE_IN message
//     time): every event with a message in the range, one copy per key;
//   - keys: those events' original messages (via the inbox row's stream_seq,
//     or, for a key without one, its replayed_body rejection record);
//   - status (with the other filters): the inbox rows in that status.
//
// Keys, integration, tenant, event_type and status also filter the other
// sources. A selector without keys, a range or a status is refused: replay
// everything is never what an operator means.
type Selector struct {
	Keys        []string   `json:"keys,omitempty"`
	Integration string     `json:"integration,omitempty"`
	Tenant      string     `json:"tenant,omitempty"`
	EventType   string     `json:"event_type,omitempty"`
	StreamSeq   *SeqRange  `json:"stream_seq,omitempty"`
	Since       *time.Time `json:"since,omitempty"`
	Until       *time.Time `json:"until,omitempty"`
	Status      string     `json:"status,omitempty"`
}

// ReplayRequest is the body of POST /api/v1/replays.
type ReplayRequest struct {
	Selector Selector `json:"selector"`
	// Mode is exact (the default: the inbox decides) or reexecute (the
	// handler runs again; requires a reason).
	Mode inbox.ReplayMode `json:"mode,omitempty"`
	// DryRun defaults to true: without "dry_run": false nothing is published.
	DryRun *bool  `json:"dry_run,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Rate in events per second; 0 takes the replayer's default.
	Rate int `json:"rate,omitempty"`
	// AdmitReplayedBodies applies the selected events even where the replay
	// guard refused their bodies (reason replayed_body): the operator has
	// judged those deliveries genuine. Only with Selector.Keys: a range or
	// status replay must never launder captured copies. Defaults to false.
	AdmitReplayedBodies bool `json:"admit_replayed_bodies,omitempty"`
}

// RedeliverySelector says which processed messages a redelivery publishes
// again. From the stream (the default) it needs a range of INTAKE_OUT
// (stream_seq and/or since/until); from the outbox, keys or since/until
// (outbox created_at). Subject (stream only) filters with NATS wildcards,
// e.g. "intake.out.acme.>".
type RedeliverySelector struct {
	Keys        []string   `json:"keys,omitempty"`
	Integration string     `json:"integration,omitempty"`
	Tenant      string     `json:"tenant,omitempty"`
	EventType   string     `json:"event_type,omitempty"`
	Subject     string     `json:"subject,omitempty"`
	StreamSeq   *SeqRange  `json:"stream_seq,omitempty"`
	Since       *time.Time `json:"since,omitempty"`
	Until       *time.Time `json:"until,omitempty"`
}

// Redelivery sources.
const (
	SourceStream = "stream"
	SourceOutbox = "outbox"
	// SourceFailed is the delivery log's failed deliveries to the
	// request's Destination (failed with since/until in range): "retry
	// its failed deliveries".
	SourceFailed = "failed"
)

// RedeliveryRequest is the body of POST /api/v1/redeliveries.
type RedeliveryRequest struct {
	// Source is stream (INTAKE_OUT, the default), outbox, or failed (with
	// Destination).
	Source string `json:"source,omitempty"`
	// Destination, when set, sends the copies to that HTTP destination
	// only (intake.dispatch.{destination}, which NATS subscribers do not
	// see), with the original's webhook-id. Required with source failed.
	Destination string             `json:"destination,omitempty"`
	Selector    RedeliverySelector `json:"selector"`
	// DryRun defaults to true, as for replays.
	DryRun *bool  `json:"dry_run,omitempty"`
	Reason string `json:"reason,omitempty"`
	Rate   int    `json:"rate,omitempty"`
}

// ReplayQuery filters and pages GET /api/v1/replays; zero fields do not
// filter.
type ReplayQuery struct {
	Mode        string // exact, reexecute, redeliver
	State       string // awaiting_approval, running, done, failed, cancelled
	RequestedBy string // the token's name
	// DryRuns is DryRunsExclude (the API's default), DryRunsInclude or
	// DryRunsOnly.
	DryRuns string
	// Since and Until bound created_at: since ≤ t < until.
	Since, Until time.Time
	Limit        int // rows per page; 0 takes the API's default (100), at most 1000
	Cursor       string
}

// The values of ReplayQuery.DryRuns (the dry_runs parameter).
const (
	DryRunsExclude = "exclude"
	DryRunsInclude = "include"
	DryRunsOnly    = "only"
)

// Replays is GET /api/v1/replays.
func (c *Client) Replays(ctx context.Context, q ReplayQuery) (ReplayPage, error) {
	v := query{}
	v.str("mode", q.Mode)
	v.str("state", q.State)
	v.str("requested_by", q.RequestedBy)
	v.str("dry_runs", q.DryRuns)
	v.time("since", q.Since)
	v.time("until", q.Until)
	v.int("limit", q.Limit)
	v.str("cursor", q.Cursor)
	var page ReplayPage
	err := c.get(ctx, "/api/v1/replays", url.Values(v), &page)
	return page, err
}

// Replay is GET /api/v1/replays/{id}; it reads redeliveries too.
func (c *Client) Replay(ctx context.Context, id string) (Replay, error) {
	var rep Replay
	err := c.get(ctx, "/api/v1/replays/"+url.PathEscape(id), nil, &rep)
	return rep, err
}

// StartReplay is POST /api/v1/replays: a dry run's result (the default), or
// the replay, running, or done when it had nothing to publish.
func (c *Client) StartReplay(ctx context.Context, req ReplayRequest) (Replay, error) {
	var rep Replay
	_, err := c.Do(ctx, http.MethodPost, "/api/v1/replays", req, &rep)
	return rep, err
}

// StartRedelivery is POST /api/v1/redeliveries, answered as StartReplay.
func (c *Client) StartRedelivery(ctx context.Context, req RedeliveryRequest) (Replay, error) {
	var rep Replay
	_, err := c.Do(ctx, http.MethodPost, "/api/v1/redeliveries", req, &rep)
	return rep, err
}

// ApproveReplay is POST /api/v1/replays/{id}/approve: a second operator
// lets a replay that awaits approval publish. Its requester gets a 403; a
// replay awaiting nothing (any more) is a 409 whose Error.Body holds it.
func (c *Client) ApproveReplay(ctx context.Context, id string) (Replay, error) {
	var rep Replay
	_, err := c.Do(ctx, http.MethodPost, "/api/v1/replays/"+url.PathEscape(id)+"/approve", nil, &rep)
	return rep, err
}

// CancelReplay is POST /api/v1/replays/{id}/cancel (redeliveries too); what
// was published stays published. A replay no longer running is a 409 whose
// Error.Body holds it.
func (c *Client) CancelReplay(ctx context.Context, id string) (Replay, error) {
	var rep Replay
	_, err := c.Do(ctx, http.MethodPost, "/api/v1/replays/"+url.PathEscape(id)+"/cancel", nil, &rep)
	return rep, err
}
