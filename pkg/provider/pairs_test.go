package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"
)

// stripePairs is the pairs family configured as Stripe's scheme.
func stripePairs() Config {
	return Config{Provider: "pairs", Secrets: []string{stripeSecret}, Tolerance: DefaultTolerance,
		Pairs:   PairsConfig{Header: "Stripe-Signature", Window: "past"},
		EventID: Field{Field: "id"}, EventType: Field{Field: "type"}}
}

func pairsMAC(secret, signed string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(signed))
	return hex.EncodeToString(m.Sum(nil))
}

func TestPairsVerify(t *testing.T) {
	body := stripeBody("evt_1")
	now := time.Unix(1_700_000_000, 0)
	ts := "1700000000"
	good := stripeSig(stripeSecret, 1_700_000_000, body)
	other := stripeSig(stripeOtherSecret, 1_700_000_000, body)
	h := func(v string) map[string][]string { return hdr("Stripe-Signature", v) }
	want := Identity{ID: "evt_1", Type: "charge.succeeded"}
	at := func(off time.Duration) map[string][]string {
		t := now.Add(off).Unix()
		return h("t=" + strconv.FormatInt(t, 10) + ",v1=" + stripeSig(stripeSecret, t, body))
	}
	runVerifyCases(t, stripePairs(), body, now, []verifyCase{
		{name: "stripe: valid", header: h("t=" + ts + ",v1=" + good), want: want},
		{name: "stripe: several v1, unknown keys", header: h("t=" + ts + ",v0=" + other + ",v1=" + other + ",x=y,v1=" + good), want: want},
		{name: "stripe: last t wins", header: h("t=1,t=" + ts + ",v1=" + good), want: want},
		{name: "stripe: a malformed t anywhere", header: h("t=x,t=" + ts + ",v1=" + good), wantErr: ErrTimestamp},
		{name: "stripe: leading zero refused", header: h("t=0" + ts + ",v1=" + good), wantErr: ErrTimestamp},
		{name: "stripe: pair without =", header: h("t=" + ts + ",v1=" + good + ",junk"), wantErr: ErrBadSignature},
		{name: "stripe: value with =", header: h("t=" + ts + ",v1=" + good + "="), wantErr: ErrBadSignature},
		{name: "stripe: no t", header: h("v1=" + good), wantErr: ErrTimestamp},
		{name: "stripe: no v1", header: h("t=" + ts + ",v0=" + good), wantErr: ErrBadSignature},
		{name: "stripe: wrong secret", header: h("t=" + ts + ",v1=" + other), wantErr: ErrBadSignature},
		{name: "stripe: tampered body", body: strp(body + " "), header: h("t=" + ts + ",v1=" + good), wantErr: ErrBadSignature},
		{name: "stripe: stale at the boundary", header: at(-DefaultTolerance), want: want},
		{name: "stripe: stale past it", header: at(-DefaultTolerance - time.Second), wantErr: ErrTimestamp},
		{name: "stripe: future passes (window past)", header: at(time.Hour), want: want},
		{name: "both: future refused", cfg: func(c *Config) { c.Pairs.Window = "" }, header: at(DefaultTolerance + time.Second), wantErr: ErrTimestamp},
		{name: "rotated: second secret", cfg: func(c *Config) { c.Secrets = []string{stripeOtherSecret, stripeSecret} },
			header: h("t=" + ts + ",v1=" + good), want: Identity{ID: "evt_1", Type: "charge.succeeded", SecretIndex: 1}},
		{name: "missing header", header: hdr("X-Other", "t="+ts), wantErr: ErrMissingHeader},
		{name: "timestamp in its own header", cfg: func(c *Config) { c.Pairs.TimestampHeader = "X-Ts" },
			header: hdr("Stripe-Signature", "v1="+good, "X-Ts", ts), want: want},
		{name: "timestamp header missing", cfg: func(c *Config) { c.Pairs.TimestampHeader = "X-Ts" },
			header: h("v1=" + good), wantErr: ErrMissingHeader},
		{name: "base64 signatures", cfg: func(c *Config) { c.Pairs.Encoding = "base64" },
			header: h("t=" + ts + ",v1=" + base64.StdEncoding.EncodeToString(mustHex(good))), want: want},
		{name: "rfc3339 in the header", cfg: func(c *Config) { c.Pairs.TimestampFormat, c.Pairs.KVSeparator = "rfc3339", "~" },
			header: h("t~2023-11-14T22:13:20Z,v1~" + pairsMAC(stripeSecret, "2023-11-14T22:13:20Z."+body)), want: want},
		{name: "rfc3339 malformed", cfg: func(c *Config) { c.Pairs.TimestampFormat, c.Pairs.KVSeparator = "rfc3339", "~" },
			header: h("t~2023-11-14 22:13:20Z,v1~" + good), wantErr: ErrTimestamp},
	})
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func TestPairsConfigErrors(t *testing.T) {
	base := stripePairs()
	for _, tt := range []struct {
		name   string
		edit   func(*Config)
		errHas string
	}{
		{"no header", func(c *Config) { c.Pairs.Header = "" }, "pairs.header"},
		{"bad header", func(c *Config) { c.Pairs.Header = "A B" }, "pairs.header"},
		{"separators clash", func(c *Config) { c.Pairs.PairSeparator = "=" }, "pairs.pair_separator"},
		{"key and header both", func(c *Config) { c.Pairs.TimestampHeader, c.Pairs.TimestampKey = "X-Ts", "t" }, "pairs.timestamp_key"},
		{"same keys", func(c *Config) { c.Pairs.SignatureKey = "t" }, "pairs.signature_key"},
		{"format", func(c *Config) { c.Pairs.TimestampFormat = "iso" }, "pairs.timestamp_format"},
		{"window", func(c *Config) { c.Pairs.Window = "future" }, "pairs.window"},
		{"algorithm", func(c *Config) { c.Pairs.Algorithm = "md5" }, "pairs.algorithm"},
		{"encoding", func(c *Config) { c.Pairs.Encoding = "b32" }, "pairs.encoding"},
		{"template without timestamp", func(c *Config) { c.Pairs.Template = "{body}" }, "must sign {timestamp}"},
		{"template with id", func(c *Config) { c.Pairs.Template = "{id}.{timestamp}.{body}" }, "{id}"},
		{"no event id", func(c *Config) { c.EventID = Field{} }, "event_id"},
		{"unsigned id header", func(c *Config) { c.EventID = Field{Header: "X-Id"} }, "pairs.allow_unsigned_id"},
		{"pairs on hmac", func(c *Config) { c.Provider = "hmac" }, "pairs: only for provider pairs"},
	} {
		cfg := base
		tt.edit(&cfg)
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: err = %v, want it to name %q", tt.name, err, tt.errHas)
		}
	}
}

// FuzzPairsStripeDifferential holds the pairs family, configured as Stripe,
// to stripe-go and to Intake's own stripe verifier: what the family
// accepts, both accept; what stripe-go accepts with canonical t values, the
// family accepts.
func FuzzPairsStripeDifferential(f *testing.F) {
	pairs, err := New(stripePairs())
	if err != nil {
		f.Fatal(err)
	}
	native, err := New(Config{Provider: "stripe", Secrets: []string{stripeSecret}, Tolerance: DefaultTolerance})
	if err != nil {
		f.Fatal(err)
	}
	early := time.Unix(-1<<40, 0)
	body := stripeBody("evt_f")
	good := stripeSig(stripeSecret, 1_700_000_000, body)
	f.Add("t=1700000000,v1="+good, []byte(body))
	f.Add("t=1700000000,v0=ab,v1=zz,v1="+good+",x=y", []byte(body))
	f.Add("t=1,t=1700000000,v1="+good, []byte(body))
	f.Add("t=x,t=1700000000,v1="+good, []byte(body))
	f.Add("t=01700000000,v1="+good, []byte(body))
	f.Add("v1="+good+",t=1700000000,", []byte(body))
	f.Add("t=1700000000,v1="+good+"=", []byte("{}"))
	f.Add("", []byte(nil))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		d := &Request{Header: hdr("Stripe-Signature", header), Body: body, Now: early}
		_, err := pairs.Verify(d)
		if err != nil {
			checkSentinel(t, err)
		}
		ours := err == nil || errors.Is(err, ErrMalformed)
		_, nerr := native.Verify(d)
		nativeOK := nerr == nil || errors.Is(nerr, ErrMalformed)
		theirs := webhook.ValidatePayloadIgnoringTolerance(body, header, stripeSecret)
		if ours && (theirs != nil || !nativeOK) {
			t.Fatalf("pairs accepted what stripe-go (%v) or the stripe verifier (%v) rejects", theirs, nerr)
		}
		canonical := true
		for _, pair := range strings.Split(header, ",") {
			if k, val, _ := strings.Cut(pair, "="); k == "t" && (val == "" || strings.Trim(val, "0123456789") != "" || (len(val) > 1 && val[0] == '0')) {
				canonical = false
			}
		}
		if theirs == nil && canonical && !ours {
			t.Fatalf("stripe-go accepted what pairs rejects: %v", err)
		}
		if nativeOK && canonical && !ours {
			t.Fatalf("the stripe verifier accepted what pairs rejects: %v", err)
		}
	})
}

// FuzzPairsVerify: with Paddle's shape and a base64 variant, success means
// a signature entry is the MAC of "{ts}:{body}" for the header's last ts,
// canonical and in the window.
func FuzzPairsVerify(f *testing.F) {
	now := time.Unix(paddleTS, 0)
	v, err := New(Config{Provider: "paddle", Secrets: []string{paddleSecret}, Tolerance: DefaultTolerance})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(paddleSignature, []byte(paddleBody))
	f.Add("ts=1710929255;h1=zz;h1="+strings.TrimPrefix(paddleSignature, "ts=1710929255;h1="), []byte(paddleBody))
	f.Add("ts=1710929255;;h1=", []byte("{}"))
	f.Add("h1=00;ts=+1", []byte("{}"))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		ev, err := v.Verify(&Request{Header: hdr("Paddle-Signature", header), Body: body, Now: now})
		if err != nil {
			checkSentinel(t, err)
			return
		}
		if ev.ID == "" {
			t.Fatal("accepted without an id")
		}
		var ts string
		var sigs []string
		for _, pair := range strings.Split(header, ";") {
			k, val, _ := strings.Cut(pair, "=")
			switch k {
			case "ts":
				ts = val
			case "h1":
				sigs = append(sigs, strings.ToLower(val))
			}
		}
		sec, perr := strconv.ParseInt(ts, 10, 64)
		if perr != nil || strconv.FormatInt(sec, 10) != ts || now.Sub(time.Unix(sec, 0)).Abs() > DefaultTolerance {
			t.Fatalf("accepted ts %q", ts)
		}
		want := pairsMAC(paddleSecret, ts+":"+string(body))
		for _, s := range sigs {
			if s == want {
				return
			}
		}
		t.Fatalf("accepted %q without the MAC", header)
	})
}
