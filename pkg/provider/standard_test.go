package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Published example from the Standard Webhooks libraries' test suites.
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specMsgID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specPayload   = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

var (
	keyA = []byte("standard-key-A-0123456789abcdef")
	keyB = []byte("standard-key-B-fedcba9876543210")
	keyC = []byte("standard-key-C-never-configured")
)

func whsec(key []byte) string { return "whsec_" + base64.StdEncoding.EncodeToString(key) }

// signStandard implements the spec's algorithm independently of standard.go.
func signStandard(key []byte, id string, ts int64, body string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "." + body))
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func standardHeader(id, ts, sig string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", sig)
	return h
}

func newTestVerifier(t *testing.T, cfg Config) Verifier {
	t.Helper()
	v, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return v
}

func TestStandardSpecVector(t *testing.T) {
	v := newTestVerifier(t, Config{Provider: "standard", Secrets: []string{specSecret}})
	ev, err := v.Verify(&Delivery{
		Header: standardHeader(specMsgID, strconv.Itoa(specTimestamp), specSignature),
		Body:   []byte(specPayload),
		Now:    time.Unix(specTimestamp, 0),
	})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	want := Event{ID: specMsgID}
	if ev != want {
		t.Fatalf("event = %+v, want %+v", ev, want)
	}
	// The test's own signer must agree with the published vector, or every
	// other case here proves nothing.
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(specSecret, "whsec_"))
	if got := signStandard(key, specMsgID, specTimestamp, specPayload); got != specSignature {
		t.Fatalf("signStandard = %s, want the published %s", got, specSignature)
	}
}

func TestStandardVerify(t *testing.T) {
	const (
		id   = "msg_2Lx3hQ8kR"
		body = `{"type":"invoice.paid","data":{"id":"in_1","kind":"invoice"}}`
	)
	now := time.Unix(1_700_000_000, 0)
	tol := 5 * time.Minute
	ts := now.Unix()
	tsStr := strconv.FormatInt(ts, 10)
	sigA := signStandard(keyA, id, ts, body)
	sigB := signStandard(keyB, id, ts, body)
	sigC := signStandard(keyC, id, ts, body)
	macA := strings.TrimPrefix(sigA, "v1,")

	// at builds a delivery signed with keyA at now+offset.
	at := func(offset time.Duration) http.Header {
		t := now.Add(offset).Unix()
		return standardHeader(id, strconv.FormatInt(t, 10), signStandard(keyA, id, t, body))
	}
	without := func(name string) http.Header {
		h := standardHeader(id, tsStr, sigA)
		h.Del(name)
		return h
	}

	tests := []struct {
		name    string
		secrets []string
		cfg     func(*Config)
		header  http.Header
		body    string // "" means the default body, unless noBody
		noBody  bool
		want    Event
		wantErr error
		errHas  string // a detail the message must name
	}{
		{name: "valid", header: standardHeader(id, tsStr, sigA), want: Event{ID: id, Type: "invoice.paid"}},
		{name: "one of several entries matches", header: standardHeader(id, tsStr, sigC+" "+sigA+" "+sigC),
			want: Event{ID: id, Type: "invoice.paid"}},
		{name: "extra spaces between entries", header: standardHeader(id, tsStr, "  "+sigC+"   "+sigA+" "),
			want: Event{ID: id, Type: "invoice.paid"}},
		{name: "rotated: second secret matches", secrets: []string{whsec(keyC), whsec(keyB)},
			header: standardHeader(id, tsStr, sigB), want: Event{ID: id, Type: "invoice.paid", SecretIndex: 1}},
		{name: "both secrets match: first wins", secrets: []string{whsec(keyA), whsec(keyB)},
			header: standardHeader(id, tsStr, sigB+" "+sigA), want: Event{ID: id, Type: "invoice.paid"}},
		{name: "secret without whsec_ prefix", secrets: []string{base64.StdEncoding.EncodeToString(keyA)},
			header: standardHeader(id, tsStr, sigA), want: Event{ID: id, Type: "invoice.paid"}},
		{name: "tampered body", header: standardHeader(id, tsStr, sigA), body: strings.Replace(body, "in_1", "in_2", 1),
			wantErr: ErrBadSignature},
		{name: "tampered id", header: standardHeader("msg_other", tsStr, sigA), wantErr: ErrBadSignature},
		{name: "tampered timestamp", header: standardHeader(id, strconv.FormatInt(ts-1, 10), sigA), wantErr: ErrBadSignature},
		{name: "wrong secret", header: standardHeader(id, tsStr, sigC), wantErr: ErrBadSignature},
		{name: "timestamp at past tolerance", header: at(-tol), want: Event{ID: id, Type: "invoice.paid"}},
		{name: "timestamp 1s past tolerance (past)", header: at(-tol - time.Second), wantErr: ErrTimestamp},
		{name: "timestamp at future tolerance", header: at(tol), want: Event{ID: id, Type: "invoice.paid"}},
		{name: "timestamp 1s past tolerance (future)", header: at(tol + time.Second), wantErr: ErrTimestamp},
		{name: "timestamp checked before signature", header: standardHeader(id, "1", sigC), wantErr: ErrTimestamp},
		{name: "timestamp fractional", header: standardHeader(id, tsStr+".5", sigA), wantErr: ErrTimestamp},
		{name: "timestamp in milliseconds", header: standardHeader(id, tsStr+"000", sigA), wantErr: ErrTimestamp},
		{name: "timestamp not a number", header: standardHeader(id, "yesterday", sigA), wantErr: ErrTimestamp},
		{name: "timestamp with sign", header: standardHeader(id, "+"+tsStr, sigA), wantErr: ErrTimestamp},
		{name: "timestamp negative", header: standardHeader(id, "-"+tsStr, sigA), wantErr: ErrTimestamp},
		{name: "timestamp overflows int64", header: standardHeader(id, "99999999999999999999", sigA), wantErr: ErrTimestamp},
		{name: "timestamp RFC 3339", header: standardHeader(id, now.Format(time.RFC3339), sigA), wantErr: ErrTimestamp},
		{name: "missing webhook-id", header: without("webhook-id"), wantErr: ErrMissingHeader, errHas: "Webhook-Id"},
		{name: "missing webhook-timestamp", header: without("webhook-timestamp"), wantErr: ErrMissingHeader, errHas: "Webhook-Timestamp"},
		{name: "missing webhook-signature", header: without("webhook-signature"), wantErr: ErrMissingHeader, errHas: "Webhook-Signature"},
		{name: "empty webhook-signature", header: standardHeader(id, tsStr, ""), wantErr: ErrMissingHeader},
		{name: "v1a and unknown versions skipped", header: standardHeader(id, tsStr, "v1a,"+macA+" v2,"+macA+" "+sigA),
			want: Event{ID: id, Type: "invoice.paid"}},
		{name: "right MAC under v1a only", header: standardHeader(id, tsStr, "v1a,"+macA), wantErr: ErrBadSignature},
		{name: "right MAC without version", header: standardHeader(id, tsStr, macA), wantErr: ErrBadSignature},
		{name: "bad base64 entry skipped", header: standardHeader(id, tsStr, "v1,!!not-base64!! v1,"+macA[:43]+"* "+sigA),
			want: Event{ID: id, Type: "invoice.paid"}},
		{name: "only bad entries", header: standardHeader(id, tsStr, "v1,!!not-base64!! v1, v1 ,"), wantErr: ErrBadSignature},
		{name: "unpadded MAC not accepted", header: standardHeader(id, tsStr, strings.TrimRight(sigA, "=")), wantErr: ErrBadSignature},
		{name: "no type field", body: `{"data":{}}`, header: standardHeader(id, tsStr, signStandard(keyA, id, ts, `{"data":{}}`)),
			want: Event{ID: id}},
		{name: "numeric type field", body: `{"type":7}`, header: standardHeader(id, tsStr, signStandard(keyA, id, ts, `{"type":7}`)),
			want: Event{ID: id, Type: "7"}},
		{name: "body not JSON: type empty", body: "plain text", header: standardHeader(id, tsStr, signStandard(keyA, id, ts, "plain text")),
			want: Event{ID: id}},
		{name: "empty body", noBody: true, header: standardHeader(id, tsStr, signStandard(keyA, id, ts, "")),
			want: Event{ID: id}},
		{name: "event_type from header", cfg: func(c *Config) { c.EventType = Field{Header: "X-Event-Type"} },
			header: func() http.Header { h := standardHeader(id, tsStr, sigA); h.Set("x-event-type", "hdr.type"); return h }(),
			want:   Event{ID: id, Type: "hdr.type"}},
		{name: "event_type header absent falls back to field", cfg: func(c *Config) { c.EventType = Field{Header: "X-Event-Type", Field: "data.kind"} },
			header: standardHeader(id, tsStr, sigA), want: Event{ID: id, Type: "invoice"}},
		{name: "event_type header absent, no field", cfg: func(c *Config) { c.EventType = Field{Header: "X-Event-Type"} },
			header: standardHeader(id, tsStr, sigA), want: Event{ID: id}},
		{name: "event_type field on non-JSON body", cfg: func(c *Config) { c.EventType = Field{Field: "data.kind"} },
			body: "plain", header: standardHeader(id, tsStr, signStandard(keyA, id, ts, "plain")), wantErr: ErrMalformed},
		{name: "event_id from field", cfg: func(c *Config) { c.EventID = Field{Field: "data.id"} },
			header: standardHeader(id, tsStr, sigA), want: Event{ID: "in_1", Type: "invoice.paid"}},
		{name: "event_id field missing", cfg: func(c *Config) { c.EventID = Field{Field: "data.nope"} },
			header: standardHeader(id, tsStr, sigA), wantErr: ErrMalformed},
		{name: "event_id field on non-JSON body", cfg: func(c *Config) { c.EventID = Field{Field: "id"} },
			body: "[", header: standardHeader(id, tsStr, signStandard(keyA, id, ts, "[")), wantErr: ErrMalformed},
		{name: "bad signature wins over malformed body", cfg: func(c *Config) { c.EventID = Field{Field: "id"} },
			body: "[", header: standardHeader(id, tsStr, sigA), wantErr: ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Provider: "standard", Secrets: tt.secrets, Tolerance: tol}
			if cfg.Secrets == nil {
				cfg.Secrets = []string{whsec(keyA)}
			}
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			b := body
			if tt.body != "" || tt.noBody {
				b = tt.body
			}
			v := newTestVerifier(t, cfg)
			ev, err := v.Verify(&Delivery{Header: tt.header, Body: []byte(b), Now: now})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if got, want := Reason(err), Reason(tt.wantErr); got != want {
					t.Errorf("Reason = %q, want %q", got, want)
				}
				if tt.errHas != "" && !strings.Contains(err.Error(), tt.errHas) {
					t.Errorf("err %q does not name %q", err, tt.errHas)
				}
				assertNoLeak(t, err, append(cfg.Secrets, tt.header.Get("webhook-signature"), macA, b)...)
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if ev != tt.want {
				t.Fatalf("event = %+v, want %+v", ev, tt.want)
			}
		})
	}
}

func TestStandardZeroNowUsesClock(t *testing.T) {
	v := newTestVerifier(t, Config{Provider: "standard", Secrets: []string{whsec(keyA)}})
	ts := time.Now().Unix()
	h := standardHeader("msg_1", strconv.FormatInt(ts, 10), signStandard(keyA, "msg_1", ts, "{}"))
	if _, err := v.Verify(&Delivery{Header: h, Body: []byte("{}")}); err != nil {
		t.Fatalf("Verify with zero Now: %v", err)
	}
}

// assertNoLeak fails when err's message carries any of the sensitive strings.
func assertNoLeak(t *testing.T, err error, sensitive ...string) {
	t.Helper()
	msg := err.Error()
	for _, s := range sensitive {
		if len(s) >= 6 && strings.Contains(msg, s) {
			t.Errorf("error %q leaks %q", msg, s)
		}
	}
}

func BenchmarkStandardVerify(b *testing.B) {
	body := []byte(`{"type":"invoice.paid","data":{"id":"in_1","amount":4200,"currency":"eur","lines":[1,2,3]}}`)
	now := time.Unix(1_700_000_000, 0)
	v, err := New(Config{Provider: "standard", Secrets: []string{whsec(keyA)}})
	if err != nil {
		b.Fatal(err)
	}
	d := &Delivery{
		Header: standardHeader("msg_1", strconv.FormatInt(now.Unix(), 10), signStandard(keyA, "msg_1", now.Unix(), string(body))),
		Body:   body,
		Now:    now,
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(d); err != nil {
			b.Fatal(err)
		}
	}
}
