package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"
)

const (
	stripeSecret      = "whsec_test_stripe_secret_0123456789"
	stripeOtherSecret = "whsec_test_stripe_secret_rotated_9876"
)

// stripeSig implements Stripe's scheme independently of stripe.go.
func stripeSig(secret string, ts int64, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts, 10) + "." + body))
	return hex.EncodeToString(m.Sum(nil))
}

func stripeBody(id string) string {
	return `{"id":"` + id + `","object":"event","api_version":"` + stripego.APIVersion +
		`","created":1699999990,"type":"charge.succeeded","data":{"object":{"id":"ch_1","object":"charge"}}}`
}

func TestStripeVerify(t *testing.T) {
	body := stripeBody("evt_1")
	now := time.Unix(1_700_000_000, 0)
	ts := now.Unix()
	tsStr := strconv.FormatInt(ts, 10)
	good := stripeSig(stripeSecret, ts, body)
	other := stripeSig(stripeOtherSecret, ts, body)
	sh := func(v string) http.Header { return hdr("Stripe-Signature", v) }
	at := func(offset time.Duration) http.Header {
		t := now.Add(offset).Unix()
		return sh("t=" + strconv.FormatInt(t, 10) + ",v1=" + stripeSig(stripeSecret, t, body))
	}
	want := Identity{ID: "evt_1", Type: "charge.succeeded", ObjectID: "ch_1", ObjectVersion: "1699999990"}
	wantAt := func(i int) Identity { w := want; w.SecretIndex = i; return w }

	runVerifyCases(t, Config{Provider: "stripe", Secrets: []string{stripeSecret}}, body, now, []verifyCase{
		{name: "valid", header: sh("t=" + tsStr + ",v1=" + good), want: want},
		{name: "uppercase hex", header: sh("t=" + tsStr + ",v1=" + strings.ToUpper(good)), want: want},
		{name: "v0 and unknown keys ignored", header: sh("t=" + tsStr + ",v0=" + other + ",v1=" + good + ",x=y"), want: want},
		{name: "several v1, one matches", header: sh("t=" + tsStr + ",v1=" + other + ",v1=" + good), want: want},
		{name: "undecodable v1 skipped", header: sh("t=" + tsStr + ",v1=zz" + good[2:] + ",v1=" + good), want: want},
		{name: "only undecodable v1", header: sh("t=" + tsStr + ",v1=zz" + good[2:]), wantErr: ErrBadSignature},
		{name: "right MAC under v0 only", header: sh("t=" + tsStr + ",v0=" + good), wantErr: ErrBadSignature},
		{name: "rotated: second secret", cfg: func(c *Config) { c.Secrets = []string{stripeOtherSecret + "x", stripeSecret} },
			header: sh("t=" + tsStr + ",v1=" + good), want: wantAt(1)},
		{name: "rotation: old and new entries, both secrets", cfg: func(c *Config) { c.Secrets = []string{stripeSecret, stripeOtherSecret} },
			header: sh("t=" + tsStr + ",v1=" + other + ",v1=" + good), want: wantAt(0)},
		{name: "tampered body", body: strp(strings.Replace(body, "ch_1", "ch_2", 1)),
			header: sh("t=" + tsStr + ",v1=" + good), wantErr: ErrBadSignature},
		{name: "tampered t", header: sh("t=" + strconv.FormatInt(ts-1, 10) + ",v1=" + good), wantErr: ErrBadSignature},
		{name: "wrong secret", header: sh("t=" + tsStr + ",v1=" + other), wantErr: ErrBadSignature},
		{name: "key is the whole whsec_ string", cfg: func(c *Config) { c.Secrets = []string{strings.TrimPrefix(stripeSecret, "whsec_")} },
			header: sh("t=" + tsStr + ",v1=" + good), wantErr: ErrBadSignature},
		{name: "stale at the boundary", header: at(-300 * time.Second), want: want},
		{name: "stale just past the boundary", header: at(-301 * time.Second), wantErr: ErrTimestamp},
		// stripe-go bounds only the past; so does Intake for Stripe.
		{name: "future at the boundary", header: at(300 * time.Second), want: want},
		{name: "future past the boundary", header: at(time.Hour), want: want},
		{name: "custom tolerance", cfg: func(c *Config) { c.Tolerance = time.Minute }, header: at(-61 * time.Second), wantErr: ErrTimestamp},
		{name: "last t wins", header: sh("t=1,t=" + tsStr + ",v1=" + good), want: want},
		{name: "leading zero t", header: sh("t=0" + tsStr + ",v1=" + good), want: want},
		{name: "t not an integer", header: sh("t=" + tsStr + ".5,v1=" + good), wantErr: ErrTimestamp},
		{name: "t with a sign", header: sh("t=+" + tsStr + ",v1=" + good), wantErr: ErrTimestamp},
		{name: "t negative", header: sh("t=-" + tsStr + ",v1=" + good), wantErr: ErrTimestamp},
		{name: "t empty", header: sh("t=,v1=" + good), wantErr: ErrTimestamp},
		{name: "t missing", header: sh("v1=" + good), wantErr: ErrTimestamp},
		{name: "pair without =", header: sh("t=" + tsStr + ",v1=" + good + ",junk"), wantErr: ErrBadSignature},
		{name: "trailing comma", header: sh("t=" + tsStr + ",v1=" + good + ","), wantErr: ErrBadSignature},
		{name: "value with =", header: sh("t=" + tsStr + ",v1=" + good + "="), wantErr: ErrBadSignature},
		{name: "spaces are not trimmed", header: sh("t=" + tsStr + ", v1=" + good), wantErr: ErrBadSignature},
		{name: "no v1", header: sh("t=" + tsStr), wantErr: ErrBadSignature},
		{name: "missing header", header: http.Header{}, wantErr: ErrMissingHeader, errHas: "Stripe-Signature"},
		{name: "body not JSON", body: strp("id=evt_1"),
			header: sh("t=" + tsStr + ",v1=" + stripeSig(stripeSecret, ts, "id=evt_1")), wantErr: ErrMalformed},
		{name: "body without id", body: strp(`{"type":"x"}`),
			header: sh("t=" + tsStr + ",v1=" + stripeSig(stripeSecret, ts, `{"type":"x"}`)), wantErr: ErrMalformed},
		{name: "thin event: no data.object", body: strp(`{"id":"evt_t","type":"v2.x","created":"2024-01-01T00:00:00Z"}`),
			header: sh("t=" + tsStr + ",v1=" + stripeSig(stripeSecret, ts, `{"id":"evt_t","type":"v2.x","created":"2024-01-01T00:00:00Z"}`)),
			want:   Identity{ID: "evt_t", Type: "v2.x", ObjectVersion: "2024-01-01T00:00:00Z"}},
		{name: "object fields configured", cfg: func(c *Config) {
			c.ObjectID = Field{Field: "data.object.object"}
			c.ObjectVersion = Field{Header: "X-Version"}
		}, header: with(sh("t="+tsStr+",v1="+good), "X-Version", "7"),
			want: Identity{ID: "evt_1", Type: "charge.succeeded", ObjectID: "charge", ObjectVersion: "7"}},
	})
}

// Conformance with stripe-go: GenerateTestSignedPayload signs, Intake
// verifies; Intake's Sign signs, ConstructEvent verifies.
func TestStripeConformanceWithStripeGo(t *testing.T) {
	body := []byte(stripeBody("evt_conf"))
	cfg := Config{Provider: "stripe", Secrets: []string{stripeOtherSecret, stripeSecret}}
	v := newTestVerifier(t, cfg)
	want := Identity{ID: "evt_conf", Type: "charge.succeeded", ObjectID: "ch_1", ObjectVersion: "1699999990", SecretIndex: 1}

	t.Run("stripe-go signs, ours verifies", func(t *testing.T) {
		now := time.Unix(1_700_000_000, 0)
		for _, offset := range []time.Duration{0, -299 * time.Second, -300 * time.Second, time.Hour} {
			p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: stripeSecret, Timestamp: now.Add(offset)})
			ev, err := v.Verify(&Request{Header: hdr("Stripe-Signature", p.Header), Body: body, Now: now})
			if err != nil || ev != want {
				t.Errorf("offset %v: Verify = %+v, %v; want %+v", offset, ev, err, want)
			}
		}
		p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: stripeSecret, Timestamp: now.Add(-301 * time.Second)})
		if _, err := v.Verify(&Request{Header: hdr("Stripe-Signature", p.Header), Body: body, Now: now}); Reason(err) != "timestamp" {
			t.Errorf("301 s old: err = %v, want a timestamp rejection", err)
		}
	})
	t.Run("ours signs, stripe-go verifies", func(t *testing.T) {
		h, err := Sign(cfg, 1, "evt_conf", body, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ev, err := webhook.ConstructEvent(body, h.Get("Stripe-Signature"), stripeSecret)
		if err != nil {
			t.Fatalf("ConstructEvent: %v", err)
		}
		if ev.ID != "evt_conf" || string(ev.Type) != "charge.succeeded" {
			t.Fatalf("ConstructEvent = %s %s", ev.ID, ev.Type)
		}
	})
	t.Run("both reject", func(t *testing.T) {
		now := time.Now()
		good := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: stripeSecret, Timestamp: now}).Header
		wrong := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: "whsec_nope", Timestamp: now}).Header
		stale := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: stripeSecret, Timestamp: now.Add(-10 * time.Minute)}).Header
		v0 := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: stripeSecret, Timestamp: now, Scheme: "v0"}).Header
		for name, d := range map[string]struct {
			header string
			body   []byte
		}{
			"tampered body": {good, append(append([]byte(nil), body...), '\n')},
			"wrong secret":  {wrong, body},
			"stale":         {stale, body},
			"v0 scheme":     {v0, body},
			"no t":          {good[strings.Index(good, ",")+1:], body},
			"garbage pair":  {good + ",junk", body},
			"empty":         {"", body},
		} {
			if err := webhook.ValidatePayload(d.body, d.header, stripeSecret); err == nil {
				t.Errorf("%s: stripe-go accepted", name)
			}
			if _, err := v.Verify(&Request{Header: hdr("Stripe-Signature", d.header), Body: d.body, Now: now}); err == nil {
				t.Errorf("%s: Intake accepted", name)
			}
		}
	})
}
