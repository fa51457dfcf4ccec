package provider

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
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
	ev, err := v.Verify(&Request{
		Header: standardHeader(specMsgID, strconv.Itoa(specTimestamp), specSignature),
		Body:   []byte(specPayload),
		Now:    time.Unix(specTimestamp, 0),
	})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	want := Identity{ID: specMsgID}
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
		want    Identity
		wantErr error
		errHas  string // a detail the message must name
	}{
		{name: "valid", header: standardHeader(id, tsStr, sigA), want: Identity{ID: id, Type: "invoice.paid"}},
		{name: "one of several entries matches", header: standardHeader(id, tsStr, sigC+" "+sigA+" "+sigC),
			want: Identity{ID: id, Type: "invoice.paid"}},
		{name: "extra spaces between entries", header: standardHeader(id, tsStr, "  "+sigC+"   "+sigA+" "),
			want: Identity{ID: id, Type: "invoice.paid"}},
		{name: "rotated: second secret matches", secrets: []string{whsec(keyC), whsec(keyB)},
			header: standardHeader(id, tsStr, sigB), want: Identity{ID: id, Type: "invoice.paid", SecretIndex: 1}},
		{name: "both secrets match: first wins", secrets: []string{whsec(keyA), whsec(keyB)},
			header: standardHeader(id, tsStr, sigB+" "+sigA), want: Identity{ID: id, Type: "invoice.paid"}},
		{name: "secret without whsec_ prefix", secrets: []string{base64.StdEncoding.EncodeToString(keyA)},
			header: standardHeader(id, tsStr, sigA), want: Identity{ID: id, Type: "invoice.paid"}},
		{name: "tampered body", header: standardHeader(id, tsStr, sigA), body: strings.Replace(body, "in_1", "in_2", 1),
			wantErr: ErrBadSignature},
		{name: "tampered id", header: standardHeader("msg_other", tsStr, sigA), wantErr: ErrBadSignature},
		{name: "tampered timestamp", header: standardHeader(id, strconv.FormatInt(ts-1, 10), sigA), wantErr: ErrBadSignature},
		{name: "wrong secret", header: standardHeader(id, tsStr, sigC), wantErr: ErrBadSignature},
		{name: "timestamp at past tolerance", header: at(-tol), want: Identity{ID: id, Type: "invoice.paid"}},
		{name: "timestamp 1s past tolerance (past)", header: at(-tol - time.Second), wantErr: ErrTimestamp},
		{name: "timestamp at future tolerance", header: at(tol), want: Identity{ID: id, Type: "invoice.paid"}},
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
			want: Identity{ID: id, Type: "invoice.paid"}},
		{name: "right MAC under v1a only", header: standardHeader(id, tsStr, "v1a,"+macA), wantErr: ErrBadSignature},
		{name: "right MAC without version", header: standardHeader(id, tsStr, macA), wantErr: ErrBadSignature},
		{name: "bad base64 entry skipped", header: standardHeader(id, tsStr, "v1,!!not-base64!! v1,"+macA[:43]+"* "+sigA),
			want: Identity{ID: id, Type: "invoice.paid"}},
		{name: "only bad entries", header: standardHeader(id, tsStr, "v1,!!not-base64!! v1, v1 ,"), wantErr: ErrBadSignature},
		{name: "unpadded MAC not accepted", header: standardHeader(id, tsStr, strings.TrimRight(sigA, "=")), wantErr: ErrBadSignature},
		{name: "no type field", body: `{"data":{}}`, header: standardHeader(id, tsStr, signStandard(keyA, id, ts, `{"data":{}}`)),
			want: Identity{ID: id}},
		{name: "numeric type field", body: `{"type":7}`, header: standardHeader(id, tsStr, signStandard(keyA, id, ts, `{"type":7}`)),
			want: Identity{ID: id, Type: "7"}},
		{name: "body not JSON: type empty", body: "plain text", header: standardHeader(id, tsStr, signStandard(keyA, id, ts, "plain text")),
			want: Identity{ID: id}},
		{name: "empty body", noBody: true, header: standardHeader(id, tsStr, signStandard(keyA, id, ts, "")),
			want: Identity{ID: id}},
		{name: "event_type from header", cfg: func(c *Config) { c.EventType = Field{Header: "X-Event-Type"} },
			header: func() http.Header { h := standardHeader(id, tsStr, sigA); h.Set("x-event-type", "hdr.type"); return h }(),
			want:   Identity{ID: id, Type: "hdr.type"}},
		{name: "event_type header absent falls back to field", cfg: func(c *Config) { c.EventType = Field{Header: "X-Event-Type", Field: "data.kind"} },
			header: standardHeader(id, tsStr, sigA), want: Identity{ID: id, Type: "invoice"}},
		{name: "event_type header absent, no field", cfg: func(c *Config) { c.EventType = Field{Header: "X-Event-Type"} },
			header: standardHeader(id, tsStr, sigA), want: Identity{ID: id}},
		{name: "event_type field on non-JSON body", cfg: func(c *Config) { c.EventType = Field{Field: "data.kind"} },
			body: "plain", header: standardHeader(id, tsStr, signStandard(keyA, id, ts, "plain")), wantErr: ErrMalformed},
		{name: "event_id from field", cfg: func(c *Config) { c.EventID = Field{Field: "data.id"} },
			header: standardHeader(id, tsStr, sigA), want: Identity{ID: "in_1", Type: "invoice.paid"}},
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
			ev, err := v.Verify(&Request{Header: tt.header, Body: []byte(b), Now: now})
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
	if _, err := v.Verify(&Request{Header: h, Body: []byte("{}")}); err != nil {
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
	small := `{"type":"invoice.paid","data":{"id":"in_1","amount":4200,"currency":"eur","lines":[1,2,3]}}`
	padded := func(size int) string { // the event type first, as senders put it, then size bytes in all
		head := `{"type":"invoice.paid","data":{"note":"`
		tail := `"}}`
		return head + strings.Repeat("x", size-len(head)-len(tail)) + tail
	}
	now := time.Unix(1_700_000_000, 0)
	v, err := New(Config{Provider: "standard", Secrets: []string{whsec(keyA)}})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, body string }{{"small", small}, {"1KiB", padded(1 << 10)}, {"16KiB", padded(16 << 10)}} {
		b.Run(c.name, func(b *testing.B) {
			d := &Request{
				Header: standardHeader("msg_1", strconv.FormatInt(now.Unix(), 10), signStandard(keyA, "msg_1", now.Unix(), c.body)),
				Body:   []byte(c.body),
				Now:    now,
			}
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				id, err := v.Verify(d)
				if err != nil {
					b.Fatal(err)
				}
				if id.Type != "invoice.paid" {
					b.Fatalf("type %q, want invoice.paid", id.Type)
				}
			}
		})
	}
}

// An ed25519 key pair for v1a, from a fixed seed so failures reproduce.
var (
	edSeed = []byte("standard-webhooks-ed25519-seed-0")
	edPriv = ed25519.NewKeyFromSeed(edSeed)
	edPub  = edPriv.Public().(ed25519.PublicKey)
	whpk   = "whpk_" + base64.StdEncoding.EncodeToString(edPub)
	whsk   = "whsk_" + base64.StdEncoding.EncodeToString(edSeed)
)

// signStandardV1a implements v1a independently of standard.go.
func signStandardV1a(priv ed25519.PrivateKey, id string, ts int64, body string) string {
	msg := id + "." + strconv.FormatInt(ts, 10) + "." + body
	return "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(msg)))
}

func TestStandardV1aAndRotation(t *testing.T) {
	const (
		id   = "msg_ed25519"
		body = `{"type":"user.created","data":{"id":"u_1"}}`
	)
	now := time.Unix(1_700_000_000, 0)
	ts := now.Unix()
	tsStr := strconv.FormatInt(ts, 10)
	sigEd := signStandardV1a(edPriv, id, ts, body)
	_, otherPriv, _ := ed25519.GenerateKey(nil)
	sigOtherEd := signStandardV1a(otherPriv, id, ts, body)
	sigA := signStandard(keyA, id, ts, body)
	want := Identity{ID: id, Type: "user.created"}
	wantAt := func(i int) Identity { w := want; w.SecretIndex = i; return w }
	secrets := func(s ...string) func(*Config) { return func(c *Config) { c.Secrets = s } }
	junk := "v1a," + base64.StdEncoding.EncodeToString(make([]byte, ed25519.SignatureSize))

	runVerifyCases(t, Config{Provider: "standard", Secrets: []string{whpk}}, body, now, []verifyCase{
		{name: "v1a valid", header: standardHeader(id, tsStr, sigEd), want: want},
		{name: "v1a among v1 entries", header: standardHeader(id, tsStr, sigA+" "+sigEd), want: want},
		{name: "mixed secrets: public key second", cfg: secrets(whsec(keyC), whpk),
			header: standardHeader(id, tsStr, sigEd), want: wantAt(1)},
		{name: "mixed secrets: HMAC second", cfg: secrets(whpk, whsec(keyA)),
			header: standardHeader(id, tsStr, sigA), want: wantAt(1)},
		{name: "mixed secrets: both entries match, first secret wins", cfg: secrets(whpk, whsec(keyA)),
			header: standardHeader(id, tsStr, sigA+" "+sigEd), want: wantAt(0)},
		{name: "v1a by another key", header: standardHeader(id, tsStr, sigOtherEd), wantErr: ErrBadSignature},
		{name: "several v1a, one matches", header: standardHeader(id, tsStr, sigOtherEd+" "+sigEd+" "+sigOtherEd), want: want},
		{name: "v1a tampered body", body: strp(strings.Replace(body, "u_1", "u_2", 1)),
			header: standardHeader(id, tsStr, sigEd), wantErr: ErrBadSignature},
		{name: "v1a tampered id", header: standardHeader("msg_other", tsStr, sigEd), wantErr: ErrBadSignature},
		{name: "v1a signature labelled v1", header: standardHeader(id, tsStr, "v1,"+strings.TrimPrefix(sigEd, "v1a,")),
			wantErr: ErrBadSignature},
		{name: "v1a entry against HMAC secrets only", cfg: secrets(whsec(keyA)),
			header: standardHeader(id, tsStr, sigEd), wantErr: ErrBadSignature},
		{name: "v1a stale", header: func() http.Header {
			old := ts - 301
			return standardHeader(id, strconv.FormatInt(old, 10), signStandardV1a(edPriv, id, old, body))
		}(), wantErr: ErrTimestamp},
		{name: "v1a at the future boundary", header: func() http.Header {
			later := ts + 300
			return standardHeader(id, strconv.FormatInt(later, 10), signStandardV1a(edPriv, id, later, body))
		}(), want: want},
		{name: "v1a truncated", header: standardHeader(id, tsStr, sigEd[:len(sigEd)-4]), wantErr: ErrBadSignature},
		// The cost bound: only the first maxEd25519Entries v1a entries count.
		{name: "v1a beyond the entry cap", header: standardHeader(id, tsStr,
			strings.Repeat(junk+" ", maxEd25519Entries)+sigEd), wantErr: ErrBadSignature},
		{name: "v1a just inside the entry cap", header: standardHeader(id, tsStr,
			strings.Repeat(junk+" ", maxEd25519Entries-1)+sigEd), want: want},
	})
}

// The reference libraries parse the timestamp and sign the number, and read
// an entry's value up to a second comma; Intake does the same.
func TestStandardLibraryParity(t *testing.T) {
	const id, body = "msg_parity", `{"type":"a"}`
	now := time.Unix(1_700_000_000, 0)
	sig := signStandard(keyA, id, now.Unix(), body)
	runVerifyCases(t, Config{Provider: "standard", Secrets: []string{whsec(keyA)}}, body, now, []verifyCase{
		{name: "leading zero timestamp", header: standardHeader(id, "0"+strconv.FormatInt(now.Unix(), 10), sig),
			want: Identity{ID: id, Type: "a"}},
		{name: "entry with a trailing comma part", header: standardHeader(id, strconv.FormatInt(now.Unix(), 10), sig+",extra"),
			want: Identity{ID: id, Type: "a"}},
		{name: "non-canonical base64 padding bits", header: standardHeader(id, strconv.FormatInt(now.Unix(), 10),
			flipPaddingBits(sig)), wantErr: ErrBadSignature},
	})
}

// flipPaddingBits changes the unused low bits of the last base64 digit
// before the padding, which lenient decoders ignore.
func flipPaddingBits(sig string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	i := strings.IndexByte(sig, '=') - 1
	pos := strings.IndexByte(alphabet, sig[i])
	return sig[:i] + string(alphabet[pos^1]) + sig[i+1:]
}

func TestStandardKeyConfig(t *testing.T) {
	for _, tt := range []struct {
		name, secret, errHas string
	}{
		{"secret key instead of public", whsk, "whpk_ public key"},
		{"public key of the wrong size", "whpk_" + base64.StdEncoding.EncodeToString(edPub[:31]), "32-byte"},
		{"public key not base64", "whpk_***", "not a whpk_ key"},
	} {
		_, err := New(Config{Provider: "standard", Secrets: []string{whsec(keyA), tt.secret}})
		if err == nil || !strings.Contains(err.Error(), "secrets[1]") || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: err = %v, want secrets[1] … %s", tt.name, err, tt.errHas)
		}
		if err != nil {
			assertNoLeak(t, err, tt.secret)
		}
	}
}

// Conformance with the Standard Webhooks Go library: sign with theirs,
// verify with ours, and the reverse. Their Verify reads the wall clock, so
// these use time.Now and stay far from the tolerance boundary.
func TestStandardConformanceWithReferenceLibrary(t *testing.T) {
	const id = "msg_conformance_1"
	body := []byte(`{"type":"invoice.paid","data":{"id":"in_9"}}`)
	secrets := []string{whsec(keyB), specSecret}
	cfg := Config{Provider: "standard", Secrets: secrets}
	v := newTestVerifier(t, cfg)
	theirs, err := standardwebhooks.NewWebhook(specSecret)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("theirs signs, ours verifies", func(t *testing.T) {
		now := time.Now()
		sig, err := theirs.Sign(id, now, body)
		if err != nil {
			t.Fatal(err)
		}
		h := standardHeader(id, strconv.FormatInt(now.Unix(), 10), sig)
		ev, err := v.Verify(&Request{Header: h, Body: body, Now: now})
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if want := (Identity{ID: id, Type: "invoice.paid", SecretIndex: 1}); ev != want {
			t.Fatalf("event = %+v, want %+v", ev, want)
		}
	})
	t.Run("ours signs, theirs verifies", func(t *testing.T) {
		h, err := Sign(cfg, 1, id, body, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := theirs.Verify(body, h); err != nil {
			t.Fatalf("reference Verify: %v", err)
		}
	})
	t.Run("both reject", func(t *testing.T) {
		now := time.Now()
		good, _ := theirs.Sign(id, now, body)
		ts := strconv.FormatInt(now.Unix(), 10)
		wrong, _ := standardwebhooks.NewWebhook(whsec(keyC))
		wrongSig, _ := wrong.Sign(id, now, body)
		stale := now.Add(-10 * time.Minute)
		staleSig, _ := theirs.Sign(id, stale, body)
		future := now.Add(10 * time.Minute)
		futureSig, _ := theirs.Sign(id, future, body)
		for name, d := range map[string]struct {
			h    http.Header
			body []byte
		}{
			"tampered body":     {standardHeader(id, ts, good), append(append([]byte(nil), body...), ' ')},
			"wrong secret":      {standardHeader(id, ts, wrongSig), body},
			"stale":             {standardHeader(id, strconv.FormatInt(stale.Unix(), 10), staleSig), body},
			"future":            {standardHeader(id, strconv.FormatInt(future.Unix(), 10), futureSig), body},
			"missing id":        {with(standardHeader(id, ts, good), "webhook-id", ""), body},
			"missing signature": {with(standardHeader(id, ts, good), "webhook-signature", ""), body},
			"timestamp not int": {standardHeader(id, ts+".0", good), body},
		} {
			if err := theirs.Verify(d.body, d.h); err == nil {
				t.Errorf("%s: reference library accepted", name)
			}
			if _, err := v.Verify(&Request{Header: d.h, Body: d.body, Now: now}); err == nil {
				t.Errorf("%s: Intake accepted", name)
			}
		}
	})
}
