package examples_test

// The receivers get their deliveries from Intake's real dispatcher
// (dispatch); the hand-made sender beside it builds the requests the
// dispatcher never sends (bad signatures, stale timestamps) and the
// repeats of a delivery already answered. Each request follows the delivery
// contract (docs/destinations.md): a POST of the payload with Standard
// Webhooks headers (webhook-id the same on every attempt, webhook-timestamp
// fresh, one v1 signature per secret) and Intake's identity headers.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/intakehq/intake/dispatcher"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
)

// event is one processed message as the dispatcher delivers it.
type event struct {
	WebhookID   string // the INTAKE_OUT message id: the same on every attempt
	Key         string // the scoped key, Intake-Key and Idempotency-Key
	Integration string
	Tenant      string
	Account     string
	EventID     string
	EventType   string
	ExecutionID string
	Destination string
	Body        []byte
}

// newDelivery is attempt number attempt (from 1) of ev to url, stamped and
// signed at `at` with each of secrets (whsec_…).
func newDelivery(ctx context.Context, url string, secrets []string, ev event, attempt int, at time.Time) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(ev.Body))
	if err != nil {
		return nil, err
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if err != nil {
			return nil, fmt.Errorf("secret: %w", err)
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(ev.WebhookID + "." + ts + "."))
		mac.Write(ev.Body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	h := req.Header
	if json.Valid(ev.Body) {
		h.Set("Content-Type", "application/json")
	}
	h.Set("webhook-id", ev.WebhookID)
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", strings.Join(sigs, " "))
	h.Set("Idempotency-Key", ev.Key)
	h.Set(envelope.HeaderKey, ev.Key)
	h.Set(envelope.HeaderIntegration, ev.Integration)
	h.Set(envelope.HeaderTenant, ev.Tenant)
	h.Set(envelope.HeaderAccount, ev.Account)
	h.Set(envelope.HeaderEventID, ev.EventID)
	h.Set(envelope.HeaderEventType, ev.EventType)
	h.Set(envelope.HeaderExecutionID, ev.ExecutionID)
	h.Set("Intake-Destination", ev.Destination)
	h.Set("Intake-Attempt", strconv.Itoa(attempt))
	return req, nil
}

// send makes one request and returns its status; err is a transport
// failure (refused, reset, timed out).
func send(client *http.Client, req *http.Request) (int, error) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// deliver makes attempt number attempt of ev, signed now.
func deliver(ctx context.Context, client *http.Client, url string, secrets []string, ev event, attempt int) (int, error) {
	req, err := newDelivery(ctx, url, secrets, ev, attempt, time.Now())
	if err != nil {
		return 0, err
	}
	return send(client, req)
}

// dispatched is what Intake's dispatcher did with each event: its attempts
// in the delivery log (intake.dispatch_attempts), oldest first.
type dispatched map[string][]store.DispatchAttempt

// dispatch delivers events to url through Intake's real dispatcher: an
// embedded NATS with Intake's streams, a migrated database for its
// delivery log, a destination at url signing with secrets and retrying
// every 200 ms; each event is put on INTAKE_OUT as the processor publishes
// it (its WebhookID the message's Nats-Msg-Id). It returns once every event
// is delivered or failed, with each one's attempts.
func dispatch(t *testing.T, ctx context.Context, url string, secrets []string, events []event) dispatched {
	t.Helper()
	r := testrig.New(t, testrig.Options{})
	retry := make([]time.Duration, 50)
	for i := range retry {
		retry[i] = 200 * time.Millisecond
	}
	dest := config.Destination{Name: events[0].Destination, URL: url, Secrets: secrets, Timeout: 10 * time.Second, Retry: retry}
	d, err := dispatcher.New(dispatcher.Options{Destinations: []config.Destination{dest}, Store: r.Store, JS: r.JS})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("dispatcher: %v", err)
		}
	}()
	testenv.Eventually(t, 30*time.Second, func() bool { // its consumer takes new messages from its creation on
		_, err := r.JS.Consumer(ctx, envelope.StreamOut, dest.Durable())
		return err == nil
	}, "the dispatcher never created its consumer")
	for _, ev := range events {
		msg := nats.NewMsg(envelope.SubjectOut(ev.Tenant, ev.Integration, ev.EventType))
		msg.Header.Set(envelope.HeaderMsgID, ev.WebhookID)
		msg.Header.Set(envelope.HeaderKey, ev.Key)
		msg.Header.Set(envelope.HeaderIntegration, ev.Integration)
		msg.Header.Set(envelope.HeaderTenant, ev.Tenant)
		msg.Header.Set(envelope.HeaderAccount, ev.Account)
		msg.Header.Set(envelope.HeaderEventID, ev.EventID)
		msg.Header.Set(envelope.HeaderEventType, ev.EventType)
		msg.Header.Set(envelope.HeaderExecutionID, ev.ExecutionID)
		msg.Data = ev.Body
		r.Publish(t, msg)
	}
	out := dispatched{}
	for {
		rows, err := r.DB.Query(ctx, `SELECT msg_id, attempt, outcome, coalesce(status_code, 0), error_class
			FROM intake.dispatch_attempts ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		out = dispatched{}
		final := 0
		for rows.Next() {
			var a store.DispatchAttempt
			if err := rows.Scan(&a.MsgID, &a.Attempt, &a.Outcome, &a.StatusCode, &a.ErrorClass); err != nil {
				t.Fatal(err)
			}
			out[a.MsgID] = append(out[a.MsgID], a)
			if a.Outcome != store.DispatchRetry {
				final++
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if final == len(events) {
			return out
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d events delivered or failed when the wait ended: %v", final, len(events), context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
