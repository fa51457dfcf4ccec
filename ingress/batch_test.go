package ingress_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/pkg/envelope"
)

const batchY = `
nats: {publish_timeout: 2s}
ingress: {client_rate_limit: {per_second: -1}}
integrations:
  - name: xero
    provider: hmac
    tenant: acme
    secrets: ["xero-webhook-key"]
    hmac: {header: x-xero-signature, encoding: base64}
    split: {field: events, id: resourceId, type: eventType, max_items: 4}
  - name: logs
    provider: token
    tenant: acme
    secrets: ["auth0-stream-token"]
    token: {prefix: "Bearer "}
    event_type: {header: X-Stream}
    split: {id: log_id}
  - {name: ady, provider: adyen, tenant: acme, secrets: ["44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"]}
`

func xeroBatch(ids ...string) string {
	events := make([]string, len(ids))
	for i, id := range ids {
		events[i] = fmt.Sprintf(`{"resourceUrl":"https://api.xero.com/api.xro/2.0/Contacts/%s","resourceId":"%s","eventDateUtc":"2017-06-21T01:15:39.902","eventType":"UPDATE","eventCategory":"CONTACT","tenantId":"c2cc9b6e-9458-4c7d-93cc-f02b81b0594f","tenantType":"ORGANISATION"}`, id, id)
	}
	return `{"events":[` + strings.Join(events, ",") + `],"lastEventSequence":1,"firstEventSequence":1,"entropy":"S0m3r4Nd0mt3xt"}`
}

func xeroSigned(body string) request {
	raw, _ := hex.DecodeString(hexMAC(sha256.New, "xero-webhook-key", body))
	return request{header: hdr("X-Xero-Signature", base64.StdEncoding.EncodeToString(raw)), body: []byte(body)}
}

func batchItems(t *testing.T, a answer) int {
	t.Helper()
	var v struct {
		Items *int `json:"items"`
	}
	if err := json.Unmarshal(a.raw, &v); err != nil || v.Items == nil {
		t.Fatalf("answer %s has no items", a.raw)
	}
	return *v.Items
}

// TestBatchSplit: a split delivery is one INTAKE_IN message per item, each
// under its own scoped key and with the item's bytes as its body, all
// PubAcked before the 200; one bad item refuses the whole delivery and
// publishes nothing; a retry of a stored batch is a duplicate item by item.
func TestBatchSplit(t *testing.T) {
	r := startRigYAML(t, batchY, 0)

	body := xeroBatch("c-1", "c-2", "c-3")
	a := r.post("xero", xeroSigned(body))
	if a.code != http.StatusOK || a.status != "accepted" || batchItems(t, a) != 3 {
		t.Fatalf("batch answered %d %s", a.code, a.raw)
	}
	msgs := r.published("xero")
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want 3", len(msgs))
	}
	for i, m := range msgs {
		id := fmt.Sprintf("c-%d", i+1)
		if k := m.Header.Get(envelope.HeaderKey); k != "xero//"+id {
			t.Errorf("message %d key %q", i, k)
		}
		if typ := m.Header.Get(envelope.HeaderEventType); typ != "UPDATE" {
			t.Errorf("message %d type %q", i, typ)
		}
		var item struct{ ResourceID string }
		if err := json.Unmarshal(m.Data, &item); err != nil || item.ResourceID != id || !strings.Contains(body, string(m.Data)) {
			t.Errorf("message %d body %s", i, m.Data)
		}
	}
	if got := testutil.ToFloat64(r.metrics.Accepted.WithLabelValues("xero")); got != 3 {
		t.Errorf("accepted_total = %v, want 3", got)
	}

	// The provider's retry: every item a duplicate, nothing new.
	if a := r.post("xero", xeroSigned(body)); a.code != http.StatusOK || a.status != "duplicate" || batchItems(t, a) != 3 {
		t.Fatalf("retry answered %d %s", a.code, a.raw)
	}
	// A batch overlapping a stored one: only its new item is stored.
	if a := r.post("xero", xeroSigned(xeroBatch("c-3", "c-4"))); a.code != http.StatusOK || a.status != "accepted" || batchItems(t, a) != 2 {
		t.Fatalf("overlap answered %d %s", a.code, a.raw)
	}
	if n := len(r.published("xero")); n != 4 {
		t.Fatalf("%d messages after the overlap, want 4", n)
	}

	for _, tt := range []struct {
		name   string
		req    request
		code   int
		reason string
	}{
		{"one item without an id", xeroSigned(strings.Replace(xeroBatch("c-5", "c-6"), `"resourceId":"c-6"`, `"resource":"c-6"`, 1)), 400, "bad_batch"},
		{"one item no object", xeroSigned(`{"events":[{"resourceId":"c-7"},7]}`), 400, "bad_batch"},
		{"one item with an unusable id", xeroSigned(`{"events":[{"resourceId":"c-8"},{"resourceId":"c 9\u0000"}]}`), 400, "bad_batch"},
		{"more than max_items", xeroSigned(xeroBatch("d-1", "d-2", "d-3", "d-4", "d-5")), 400, "bad_batch"},
		{"no events", xeroSigned(`{"entropy":"x"}`), 400, "bad_batch"},
		{"tampered", tampered(xeroSigned(xeroBatch("c-9"))), 401, "bad_signature"},
	} {
		if a := r.post("xero", tt.req); a.code != tt.code || a.reason != tt.reason {
			t.Errorf("%s: %d %s, want %d %s", tt.name, a.code, a.raw, tt.code, tt.reason)
		}
	}
	if n := len(r.published("xero")); n != 4 {
		t.Fatalf("refused batches published: %d messages, want 4", n)
	}

	// Xero's intent to receive: a signed empty batch is 200, nothing stored;
	// the same with a bad signature is 401 (as Xero requires).
	itr := `{"events":[],"firstEventSequence":0,"lastEventSequence":0,"entropy":"YSXRIHCPEKJBVNBRQAOR"}`
	if a := r.post("xero", xeroSigned(itr)); a.code != http.StatusOK || batchItems(t, a) != 0 {
		t.Fatalf("intent to receive answered %d %s", a.code, a.raw)
	}
	if a := r.post("xero", tampered(xeroSigned(itr))); a.code != http.StatusUnauthorized {
		t.Fatalf("a forged intent to receive answered %d %s", a.code, a.raw)
	}
	if n := len(r.published("xero")); n != 4 {
		t.Fatalf("the empty batch published: %d messages, want 4", n)
	}

	t.Run("adyen: the signature in each item, answered [accepted]", func(t *testing.T) {
		// Adyen's published worked example.
		item := `{"NotificationRequestItem":{"additionalData":{"hmacSignature":"coqCmt/IZ4E3CzPvMY8zTjQVL5hYJUiBRg8UU+iCWo0="},"amount":{"value":1130,"currency":"EUR"},"pspReference":"7914073381342284","eventCode":"AUTHORISATION","merchantAccountCode":"TestMerchant","merchantReference":"TestPayment-1407325143704","paymentMethod":"visa","success":"true"}}`
		body := `{"live":"false","notificationItems":[` + item + `]}`
		// Stored, and stored already (a duplicate): what Adyen expects.
		for _, attempt := range []string{"first", "again"} {
			code, h, got := r.postRaw("ady", request{header: hdr("Content-Type", "application/json"), body: []byte(body)})
			if code != 200 || got != "[accepted]" || h.Get("Content-Type") != "text/plain; charset=utf-8" {
				t.Fatalf("adyen %s: answered %d %q %v", attempt, code, got, h)
			}
		}
		got := r.published("ady")
		if len(got) != 1 || got[0].Header.Get(envelope.HeaderKey) != "ady//7914073381342284:AUTHORISATION" || string(got[0].Data) != item {
			t.Fatalf("adyen published %d", len(got))
		}
		// A refusal stays Intake's JSON: Adyen retries it.
		forged := strings.Replace(body, `"value":1130`, `"value":1`, 1)
		if a := r.post("ady", request{header: hdr(), body: []byte(forged)}); a.code != 401 || a.reason != "bad_signature" {
			t.Fatalf("a forged amount answered %d %s", a.code, a.raw)
		}
	})

	t.Run("token, the body an array", func(t *testing.T) {
		logs := `[{"log_id":"90020230101","type":"s","date":"2023-01-01T00:00:00.000Z"},{"log_id":"90020230102","type":"f","date":"2023-01-01T00:00:01.000Z"}]`
		req := request{header: hdr("Authorization", "Bearer auth0-stream-token", "X-Stream", "auth0.log"), body: []byte(logs)}
		if a := r.post("logs", req); a.code != http.StatusOK || batchItems(t, a) != 2 {
			t.Fatalf("logs answered %d %s", a.code, a.raw)
		}
		got := r.published("logs")
		if len(got) != 2 || got[1].Header.Get(envelope.HeaderKey) != "logs//90020230102" || got[1].Header.Get(envelope.HeaderEventType) != "auth0.log" {
			t.Fatalf("logs published %d", len(got))
		}
		if a := r.post("logs", setHeader(req, "Authorization", "Bearer nope")); a.code != http.StatusUnauthorized {
			t.Fatalf("a wrong token answered %d", a.code)
		}
	})
}
