package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/intakehq/intake/pkg/inbox"
)

// Delivery is a verified webhook delivery as it travels on INTAKE_IN: the
// identity in headers, the raw bytes as the body. Ingress builds it, the
// processor and the replayer read it back with ParseDelivery.
type Delivery struct {
	Key           Key
	Tenant        string
	EventType     string
	PayloadSHA256 string // hex SHA-256 of Body; filled by NewDelivery
	ReceivedAt    time.Time
	Body          []byte

	// ObjectID and ObjectVersion feed the ordering guard; ObjectID "" means
	// the integration has none.
	ObjectID      string
	ObjectVersion int64

	// ReplayID and ReplayMode are set on messages the replayer republished.
	ReplayID   string
	ReplayMode inbox.ReplayMode

	// Instance is the ingress instance that accepted the delivery;
	// RetryHints the provider's retry headers (see BoundRetryHints).
	Instance   string
	RetryHints map[string]string
}

// NewDelivery fills the payload hash.
func NewDelivery(k Key, tenant, eventType string, body []byte, receivedAt time.Time) Delivery {
	return Delivery{Key: k, Tenant: tenant, EventType: eventType, PayloadSHA256: PayloadSHA256(body),
		ReceivedAt: receivedAt, Body: body}
}

// Msg is the INTAKE_IN message, with Nats-Msg-Id = DeliveryMsgID(key, hash).
func (d Delivery) Msg() *nats.Msg {
	m := &nats.Msg{
		Subject: SubjectIn(d.Key.Integration, d.EventType),
		Data:    d.Body,
		Header: nats.Header{
			HeaderMsgID:         {DeliveryMsgID(d.Key, d.PayloadSHA256)},
			HeaderKey:           {d.Key.String()},
			HeaderIntegration:   {d.Key.Integration},
			HeaderTenant:        {d.Tenant},
			HeaderAccount:       {d.Key.Account},
			HeaderEventID:       {d.Key.EventID},
			HeaderEventType:     {d.EventType},
			HeaderPayloadSHA256: {d.PayloadSHA256},
			HeaderReceivedAt:    {d.ReceivedAt.UTC().Format(time.RFC3339Nano)},
		},
	}
	if d.Instance != "" {
		m.Header.Set(HeaderInstance, d.Instance)
	}
	if hints := BoundRetryHints(d.RetryHints); len(hints) > 0 {
		if b, err := json.Marshal(hints); err == nil {
			m.Header.Set(HeaderRetryHints, string(b))
		}
	}
	if d.ObjectID != "" {
		m.Header.Set(HeaderObjectID, d.ObjectID)
		m.Header.Set(HeaderObjectVersion, strconv.FormatInt(d.ObjectVersion, 10))
	}
	return m
}

// ErrBadEnvelope: a message lacks the headers ingress writes.
var ErrBadEnvelope = errors.New("envelope: not an Intake delivery")

// ParseDelivery reads a message ingress wrote. The body is not parsed: it
// is the provider's raw bytes. Nor is it hashed again, nor the signature
// checked (VerifySignature): the processor does both when envelope keys
// are configured, since a signature covers the hash and not the body.
func ParseDelivery(h nats.Header, body []byte) (Delivery, error) {
	key, ok := ParseKey(h.Get(HeaderKey))
	if !ok {
		return Delivery{}, fmt.Errorf("%w: %s missing or invalid", ErrBadEnvelope, HeaderKey)
	}
	d := Delivery{
		Key:           key,
		Tenant:        h.Get(HeaderTenant),
		EventType:     h.Get(HeaderEventType),
		PayloadSHA256: h.Get(HeaderPayloadSHA256),
		Body:          body,
	}
	if d.Tenant == "" || d.PayloadSHA256 == "" {
		return Delivery{}, fmt.Errorf("%w: %s or %s missing", ErrBadEnvelope, HeaderTenant, HeaderPayloadSHA256)
	}
	if err := key.Validate(); err != nil {
		return Delivery{}, fmt.Errorf("%w: %s: %w", ErrBadEnvelope, HeaderKey, err)
	}
	if err := CheckText(HeaderTenant, d.Tenant, MaxTenantBytes, true); err != nil {
		return Delivery{}, fmt.Errorf("%w: %w", ErrBadEnvelope, err)
	}
	if err := CheckText(HeaderEventType, d.EventType, MaxEventTypeBytes, false); err != nil {
		return Delivery{}, fmt.Errorf("%w: %w", ErrBadEnvelope, err)
	}
	if err := CheckText(HeaderPayloadSHA256, d.PayloadSHA256, 64, true); err != nil {
		return Delivery{}, fmt.Errorf("%w: %w", ErrBadEnvelope, err)
	}
	if err := CheckText(HeaderMsgID, h.Get(HeaderMsgID), MaxMsgIDBytes, false); err != nil {
		return Delivery{}, fmt.Errorf("%w: %w", ErrBadEnvelope, err)
	}
	if t, err := time.Parse(time.RFC3339Nano, h.Get(HeaderReceivedAt)); err == nil {
		d.ReceivedAt = t
	}
	if id := h.Get(HeaderObjectID); id != "" {
		v, err := strconv.ParseInt(h.Get(HeaderObjectVersion), 10, 64)
		if err != nil {
			return Delivery{}, fmt.Errorf("%w: %s is not an integer", ErrBadEnvelope, HeaderObjectVersion)
		}
		d.ObjectID, d.ObjectVersion = id, v
	}
	d.ReplayID, d.ReplayMode = h.Get(HeaderReplayID), inbox.ReplayMode(h.Get(HeaderReplayMode))
	d.Instance = h.Get(HeaderInstance)
	if raw := h.Get(HeaderRetryHints); raw != "" {
		_ = json.Unmarshal([]byte(raw), &d.RetryHints) // hints are informational
		d.RetryHints = BoundRetryHints(d.RetryHints)
	}
	if !d.ReplayMode.Valid() {
		return Delivery{}, fmt.Errorf("%w: unknown %s %q", ErrBadEnvelope, HeaderReplayMode, d.ReplayMode)
	}
	if (d.ReplayID == "") != (d.ReplayMode == "") {
		return Delivery{}, fmt.Errorf("%w: %s and %s go together", ErrBadEnvelope, HeaderReplayID, HeaderReplayMode)
	}
	return d, nil
}

// ParseVersion normalises a provider's object version to an integer that
// orders like the version: a decimal integer as is (a counter, or unix
// seconds like Stripe's created), an RFC 3339 timestamp (Shopify's
// X-Shopify-Triggered-At) as unix microseconds.
func ParseVersion(raw string) (int64, error) {
	if v, err := strconv.ParseInt(raw, 10, 64); err == nil {
		return v, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, raw); err == nil {
		return t.UnixMicro(), nil
	}
	return 0, fmt.Errorf("object version %q is neither an integer nor an RFC 3339 timestamp", raw)
}
