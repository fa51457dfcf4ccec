package examples_test

// The sender here stands in for Intake's dispatcher in the receivers' tests:
// it follows the delivery contract and nothing else, so that the dispatcher
// can replace it. Each attempt is a POST of the payload with Standard
// Webhooks headers (webhook-id the same on every attempt, webhook-timestamp
// fresh, one v1 signature per secret) and Intake's identity headers; a 2xx
// is delivered, anything else (a status, a timeout, a broken connection) is
// tried again with the same webhook-id.

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
	"time"

	"github.com/intakehq/intake/pkg/envelope"
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

// deliverUntil2xx retries deliver, backing off from 50ms to 1s, until the
// receiver answers a 2xx or ctx ends. It returns the attempts made and the
// 2xx status.
func deliverUntil2xx(ctx context.Context, client *http.Client, url string, secrets []string, ev event) (attempts, status int, err error) {
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		status, err := deliver(ctx, client, url, secrets, ev, attempt)
		if err == nil && status >= 200 && status < 300 {
			return attempt, status, nil
		}
		select {
		case <-ctx.Done():
			return attempt, status, fmt.Errorf("%s not delivered after %d attempts (last: %d, %v): %w", ev.WebhookID, attempt, status, err, context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}
