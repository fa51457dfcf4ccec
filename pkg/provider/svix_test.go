package provider

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"
)

func svixHeader(id, ts, sig string) http.Header {
	return hdr("svix-id", id, "svix-timestamp", ts, "svix-signature", sig)
}

func TestSvixVerify(t *testing.T) {
	const (
		id   = "msg_svix_1"
		body = `{"type":"payment.succeeded","data":{"id":"pay_1"}}`
	)
	now := time.Unix(1_700_000_000, 0)
	ts := now.Unix()
	tsStr := strconv.FormatInt(ts, 10)
	sigA := signStandard(keyA, id, ts, body)
	sigC := signStandard(keyC, id, ts, body)
	want := Identity{ID: id, Type: "payment.succeeded"}
	at := func(offset time.Duration) http.Header {
		t := now.Add(offset).Unix()
		return svixHeader(id, strconv.FormatInt(t, 10), signStandard(keyA, id, t, body))
	}

	runVerifyCases(t, Config{Provider: "svix", Secrets: []string{whsec(keyA)}}, body, now, []verifyCase{
		{name: "valid", header: svixHeader(id, tsStr, sigA), want: want},
		{name: "webhook-* fallback", header: standardHeader(id, tsStr, sigA), want: want},
		{name: "incomplete svix-* set falls back to webhook-*",
			header: func() http.Header {
				h := standardHeader(id, tsStr, sigA)
				h.Set("svix-id", "msg_partial")
				return h
			}(), want: want},
		{name: "svix-* wins over webhook-*", header: func() http.Header {
			h := svixHeader(id, tsStr, sigA)
			for k, v := range standardHeader("msg_other", tsStr, sigC) {
				h[k] = v
			}
			return h
		}(), want: want},
		{name: "rotated: second secret", cfg: func(c *Config) { c.Secrets = []string{whsec(keyC), whsec(keyA)} },
			header: svixHeader(id, tsStr, sigA), want: Identity{ID: id, Type: "payment.succeeded", SecretIndex: 1}},
		{name: "several signatures, one matches", header: svixHeader(id, tsStr, sigC+" "+sigA), want: want},
		{name: "tampered body", body: strp(body + " "), header: svixHeader(id, tsStr, sigA), wantErr: ErrBadSignature},
		{name: "wrong secret", header: svixHeader(id, tsStr, sigC), wantErr: ErrBadSignature},
		{name: "stale at the boundary", header: at(-DefaultTolerance), want: want},
		{name: "stale just past the boundary", header: at(-DefaultTolerance - time.Second), wantErr: ErrTimestamp},
		{name: "future at the boundary", header: at(DefaultTolerance), want: want},
		{name: "future just past the boundary", header: at(DefaultTolerance + time.Second), wantErr: ErrTimestamp},
		{name: "timestamp not an integer", header: svixHeader(id, tsStr+"x", sigA), wantErr: ErrTimestamp},
		{name: "missing svix-signature, no fallback", header: with(svixHeader(id, tsStr, sigA), "svix-signature", ""),
			wantErr: ErrMissingHeader, errHas: "Svix-Signature"},
		{name: "missing svix-id, no fallback", header: with(svixHeader(id, tsStr, sigA), "svix-id", ""),
			wantErr: ErrMissingHeader, errHas: "Svix-Id"},
		{name: "no headers", header: http.Header{}, wantErr: ErrMissingHeader, errHas: "Svix-Id"},
	})
}

// Conformance with svix-webhooks' Go library: sign with theirs, verify with
// ours, and the reverse (their Verify reads the wall clock).
func TestSvixConformanceWithSvixLibrary(t *testing.T) {
	const id = "msg_svix_conf"
	body := []byte(`{"type":"invoice.created","data":{"n":1}}`)
	cfg := Config{Provider: "svix", Secrets: []string{whsec(keyC), specSecret}}
	v := newTestVerifier(t, cfg)
	theirs, err := svix.NewWebhook(specSecret)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("theirs signs, ours verifies", func(t *testing.T) {
		now := time.Now()
		sig, err := theirs.Sign(id, now, body)
		if err != nil {
			t.Fatal(err)
		}
		for name, h := range map[string]http.Header{
			"svix-*":    svixHeader(id, strconv.FormatInt(now.Unix(), 10), sig),
			"webhook-*": standardHeader(id, strconv.FormatInt(now.Unix(), 10), sig),
		} {
			ev, err := v.Verify(&Request{Header: h, Body: body, Now: now})
			if want := (Identity{ID: id, Type: "invoice.created", SecretIndex: 1}); err != nil || ev != want {
				t.Errorf("%s: Verify = %+v, %v; want %+v", name, ev, err, want)
			}
		}
	})
	t.Run("ours signs, theirs verifies", func(t *testing.T) {
		h, err := Sign(cfg, 1, id, body, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if h.Get("svix-id") != id {
			t.Fatalf("Sign set no svix-id: %v", h)
		}
		if err := theirs.Verify(body, h); err != nil {
			t.Fatalf("svix Verify: %v", err)
		}
	})
	t.Run("both reject", func(t *testing.T) {
		now := time.Now()
		ts := strconv.FormatInt(now.Unix(), 10)
		good, _ := theirs.Sign(id, now, body)
		stale, _ := theirs.Sign(id, now.Add(-10*time.Minute), body)
		for name, d := range map[string]struct {
			h    http.Header
			body []byte
		}{
			"tampered body": {svixHeader(id, ts, good), []byte(strings.Replace(string(body), "1", "2", 1))},
			"stale":         {svixHeader(id, strconv.FormatInt(now.Add(-10*time.Minute).Unix(), 10), stale), body},
			"no signature":  {with(svixHeader(id, ts, good), "svix-signature", ""), body},
			"v2 only":       {svixHeader(id, ts, strings.Replace(good, "v1,", "v2,", 1)), body},
		} {
			if err := theirs.Verify(d.body, d.h); err == nil {
				t.Errorf("%s: svix library accepted", name)
			}
			if _, err := v.Verify(&Request{Header: d.h, Body: d.body, Now: now}); err == nil {
				t.Errorf("%s: Intake accepted", name)
			}
		}
	})
}
