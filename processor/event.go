package processor

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
)

// Event is one verified provider delivery as the handler sees it.
//
// Its identity — Key, Tenant, EventType, PayloadSHA256, ReceivedAt,
// StreamSeq — is copied in (decode) and out (IdentityHeader, claim,
// acceptedDelivery, rejection) in this file only: a field added to it is
// added here.
type Event struct {
	Key           envelope.Key
	Tenant        string
	EventType     string
	PayloadSHA256 string
	ReceivedAt    time.Time
	StreamSeq     uint64 // sequence in INTAKE_IN
	Delivery      uint64 // JetStream delivery attempt, from 1
	Header        nats.Header
	Body          []byte // raw bytes as received

	// ObjectID and ObjectVersion are set when the integration extracts them;
	// the processor has already checked the version is not stale.
	ObjectID      string
	ObjectVersion int64

	// ExecutionID identifies this run of the handler (intake.executions).
	// Side effects outside the database take their idempotency key from the
	// scoped key — or from ExecutionID when a re-execution must repeat them.
	ExecutionID string
	// Mode is inbox.ModeOriginal, inbox.ModeRetry (an exact replay of a
	// failed event) or inbox.ModeReexecute (an operator asked to run the
	// handler again); package inbox is the one home of these values.
	Mode inbox.Mode
	// ReplayID and ReplayMode say which replay republished this message, if any.
	ReplayID   string
	ReplayMode inbox.ReplayMode

	// Instance is the ingress instance that accepted the delivery;
	// RetryHints are the provider's retry headers, if it sent any.
	Instance   string
	RetryHints map[string]string

	queue *[]*pgx.QueuedQuery
	// handler is the name of the configured handler that ran (a
	// SQLHandler's), "" for any other: the processor's failure logs and
	// intake_processor_failures_total name it.
	handler string
}

// handlerArgs are log args with the configured handler's name, when one ran.
func (ev *Event) handlerArgs(args ...any) []any {
	if ev.handler == "" {
		return args
	}
	return append([]any{"handler", ev.handler}, args...)
}

// Queue adds a statement to the event's transaction without a round trip
// of its own: queued statements are sent together with the batch's inbox,
// execution and outbox writes, just before the commit. A handler that only
// writes (INSERT, UPDATE without reading the result) should queue; one that
// must read uses the tx directly. An error in a queued statement fails the
// batch, and the processor isolates the event by splitting the batch, as
// for any database error.
func (ev *Event) Queue(sql string, args ...any) {
	if ev.queue == nil {
		panic("processor: Event.Queue called outside the processor's transaction")
	}
	*ev.queue = append(*ev.queue, &pgx.QueuedQuery{SQL: sql, Arguments: args})
}

// IdentityHeader is the set of Intake-* headers every processed message carries.
func IdentityHeader(ev *Event) nats.Header {
	h := make(nats.Header, identityHeaders)
	putIdentity(h, ev)
	return h
}

// identityHeaders is how many headers IdentityHeader sets.
const identityHeaders = 8

// putIdentity sets ev's identity headers in h, their one-value slices
// cut from one array (capacity one each: an Add copies, never writes into
// a neighbour).
func putIdentity(h nats.Header, ev *Event) {
	v := [identityHeaders]string{ev.Key.String(), ev.Key.Integration, ev.Tenant, ev.Key.Account, ev.Key.EventID,
		ev.EventType, ev.PayloadSHA256, ev.ReceivedAt.UTC().Format(time.RFC3339Nano)}
	vals := v[:] // escapes into h: one allocation for the eight values
	for i, name := range [identityHeaders]string{envelope.HeaderKey, envelope.HeaderIntegration, envelope.HeaderTenant,
		envelope.HeaderAccount, envelope.HeaderEventID, envelope.HeaderEventType, envelope.HeaderPayloadSHA256,
		envelope.HeaderReceivedAt} {
		h[name] = vals[i : i+1 : i+1]
	}
}

// decode reads the event ingress (or the replayer) wrote into msg: its
// identity from the headers, its place in INTAKE_IN from the metadata.
func decode(msg jetstream.Msg) (*Event, error) {
	d, err := envelope.ParseDelivery(msg.Headers(), msg.Data())
	if err != nil {
		return nil, err
	}
	meta, err := msg.Metadata()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", envelope.ErrBadEnvelope, err)
	}
	if d.ReceivedAt.IsZero() {
		d.ReceivedAt = meta.Timestamp
	}
	return &Event{
		Key:           d.Key,
		Tenant:        d.Tenant,
		EventType:     d.EventType,
		PayloadSHA256: d.PayloadSHA256,
		ReceivedAt:    d.ReceivedAt,
		StreamSeq:     meta.Sequence.Stream,
		Delivery:      meta.NumDelivered,
		Header:        msg.Headers(),
		Body:          d.Body,
		ObjectID:      d.ObjectID,
		ObjectVersion: d.ObjectVersion,
		ReplayID:      d.ReplayID,
		ReplayMode:    d.ReplayMode,
		Instance:      d.Instance,
		RetryHints:    d.RetryHints,
	}, nil
}

// claim is the event's inbox claim (store.ClaimBatch, RecordFailure,
// conflicts).
func (ev *Event) claim() store.Claim {
	return store.Claim{
		Key: ev.Key, Tenant: ev.Tenant, EventType: ev.EventType,
		PayloadSHA256: ev.PayloadSHA256, StreamSeq: ev.StreamSeq, ReceivedAt: ev.ReceivedAt,
	}
}

// acceptedDelivery is the delivery-history row of the event's stream
// message: ingress accepted it.
func (ev *Event) acceptedDelivery() store.DeliveryRecord {
	return store.DeliveryRecord{
		ReceiptID: envelope.StreamReceiptID(ev.StreamSeq), Key: ev.Key, ReceivedAt: ev.ReceivedAt,
		Instance: ev.Instance, StatusCode: 200, Answer: string(envelope.AnswerAccepted), RetryHints: ev.RetryHints,
	}
}

// rejection is the record of the event's message refused by the envelope
// checks (screen, guardBodies), received on subject.
func (ev *Event) rejection(subject, reason, detail string) *store.Rejection {
	r := &store.Rejection{
		Integration: ev.Key.Integration, Account: ev.Key.Account, EventID: ev.Key.EventID, Tenant: ev.Tenant,
		EventType: ev.EventType, PayloadSHA256: ev.PayloadSHA256, StreamSeq: int64(ev.StreamSeq), Subject: subject,
		MsgID: ev.Header.Get(envelope.HeaderMsgID), Reason: reason, Detail: detail,
	}
	if ev.ReplayID != "" {
		id, mode := ev.ReplayID, string(ev.ReplayMode)
		r.ReplayID, r.ReplayMode = &id, &mode
	}
	if !ev.ReceivedAt.IsZero() {
		at := ev.ReceivedAt
		r.ReceivedAt = &at
	}
	return r
}
