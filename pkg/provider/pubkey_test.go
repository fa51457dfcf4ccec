package provider

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

// SendGrid's vector: sendgrid-go helpers/eventwebhook/eventwebhook_test.go
// (the payload is json.Marshal of its map, keys sorted).
const (
	sendgridTimestamp = "1588788367"
	sendgridPublicKey = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="
	sendgridSignature = "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0="
	sendgridPayload   = `{"category":"example_payload","event":"test_event","message_id":"message_id"}`
)

func sendgridConfig() Config {
	return Config{Provider: "pubkey", Secrets: []string{sendgridPublicKey}, Tolerance: DefaultTolerance,
		PubKey: PubKeyConfig{Algorithm: "ecdsa-p256", Header: "X-Twilio-Email-Event-Webhook-Signature",
			TimestampHeader: "X-Twilio-Email-Event-Webhook-Timestamp", Template: "{timestamp}{body}"},
		EventID: Field{Field: "message_id"}, EventType: Field{Field: "event"}}
}

func pemKey(t testing.TB, k crypto.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func TestPubKeyVerify(t *testing.T) {
	now := time.Unix(1588788367, 0)
	sg := func(sig, ts string) map[string][]string {
		return hdr("X-Twilio-Email-Event-Webhook-Signature", sig, "X-Twilio-Email-Event-Webhook-Timestamp", ts)
	}
	want := Identity{ID: "message_id", Type: "test_event"}
	otherEC, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	digest := sha256.Sum256([]byte(sendgridTimestamp + sendgridPayload))
	r, s, _ := ecdsa.Sign(rand.Reader, otherEC, digest[:])
	rawRS := base64.StdEncoding.EncodeToString(append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...))
	runVerifyCases(t, sendgridConfig(), sendgridPayload, now, []verifyCase{
		{name: "sendgrid-go's vector", header: sg(sendgridSignature, sendgridTimestamp), want: want},
		{name: "rotated: second key", cfg: func(c *Config) { c.Secrets = []string{pemKey(t, &otherEC.PublicKey), sendgridPublicKey} },
			header: sg(sendgridSignature, sendgridTimestamp), want: Identity{ID: "message_id", Type: "test_event", SecretIndex: 1}},
		{name: "raw r‖s signature", cfg: func(c *Config) { c.Secrets = []string{pemKey(t, &otherEC.PublicKey)} },
			header: sg(rawRS, sendgridTimestamp), want: want},
		{name: "tampered body", body: strp(sendgridPayload + " "), header: sg(sendgridSignature, sendgridTimestamp), wantErr: ErrBadSignature},
		{name: "tampered timestamp", now: time.Second, header: sg(sendgridSignature, "1588788368"), wantErr: ErrBadSignature},
		{name: "wrong key", cfg: func(c *Config) { c.Secrets = []string{pemKey(t, &otherEC.PublicKey)} },
			header: sg(sendgridSignature, sendgridTimestamp), wantErr: ErrBadSignature},
		{name: "stale", now: DefaultTolerance + time.Second, header: sg(sendgridSignature, sendgridTimestamp), wantErr: ErrTimestamp},
		{name: "leading zero beside the body", header: sg(sendgridSignature, "0"+sendgridTimestamp), wantErr: ErrTimestamp},
		{name: "not base64", header: sg("!!", sendgridTimestamp), wantErr: ErrBadSignature},
		{name: "no timestamp", header: sg(sendgridSignature, ""), wantErr: ErrMissingHeader},
	})

	// Discord's shape: ed25519, hex, over "{timestamp}{body}", hex public key.
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	const body = `{"id":"int_1","type":2}`
	ts := "1700000000"
	edSig := hex.EncodeToString(ed25519.Sign(priv, []byte(ts+body)))
	discord := Config{Provider: "pubkey", Secrets: []string{hex.EncodeToString(pub)}, Tolerance: DefaultTolerance,
		PubKey: PubKeyConfig{Algorithm: "ed25519", Header: "X-Signature-Ed25519", Encoding: "hex",
			TimestampHeader: "X-Signature-Timestamp", Template: "{timestamp}{body}"}, EventID: Field{Field: "id"}}
	dh := func(sig string) map[string][]string {
		return hdr("X-Signature-Ed25519", sig, "X-Signature-Timestamp", ts)
	}
	runVerifyCases(t, discord, body, time.Unix(1_700_000_000, 0), []verifyCase{
		{name: "ed25519", header: dh(edSig), want: Identity{ID: "int_1"}},
		{name: "ed25519 PEM key", cfg: func(c *Config) { c.Secrets = []string{pemKey(t, pub)} }, header: dh(edSig), want: Identity{ID: "int_1"}},
		{name: "ed25519 tampered", body: strp(body + "\n"), header: dh(edSig), wantErr: ErrBadSignature},
		{name: "ed25519 short", header: dh(edSig[:64]), wantErr: ErrBadSignature},
	})

	// RSA, both paddings.
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256([]byte(body))
	v15, _ := rsa.SignPKCS1v15(rand.Reader, rk, crypto.SHA256, d[:])
	pss, _ := rsa.SignPSS(rand.Reader, rk, crypto.SHA256, d[:], nil)
	rsaCfg := func(alg string) func(*Config) {
		return func(c *Config) {
			*c = Config{Provider: "pubkey", Secrets: []string{pemKey(t, &rk.PublicKey)}, Tolerance: DefaultTolerance,
				PubKey: PubKeyConfig{Algorithm: alg, Header: "X-Sig"}, EventID: Field{Field: "id"}}
		}
	}
	b64 := base64.StdEncoding.EncodeToString
	runVerifyCases(t, Config{}, body, time.Unix(1_700_000_000, 0), []verifyCase{
		{name: "rsa pkcs1v15", cfg: rsaCfg("rsa-pkcs1v15"), header: hdr("X-Sig", b64(v15)), want: Identity{ID: "int_1"}},
		{name: "rsa pss", cfg: rsaCfg("rsa-pss"), header: hdr("X-Sig", b64(pss)), want: Identity{ID: "int_1"}},
		{name: "rsa pss signature under pkcs1v15", cfg: rsaCfg("rsa-pkcs1v15"), header: hdr("X-Sig", b64(pss)), wantErr: ErrBadSignature},
		{name: "rsa tampered", cfg: rsaCfg("rsa-pss"), body: strp(body + " "), header: hdr("X-Sig", b64(pss)), wantErr: ErrBadSignature},
	})
}

func TestPubKeyConfigErrors(t *testing.T) {
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	base := sendgridConfig()
	for _, tt := range []struct {
		name   string
		edit   func(*Config)
		errHas string
	}{
		{"no algorithm", func(c *Config) { c.PubKey.Algorithm = "" }, "pubkey.algorithm"},
		{"unknown algorithm", func(c *Config) { c.PubKey.Algorithm = "dsa" }, "pubkey.algorithm"},
		{"no header", func(c *Config) { c.PubKey.Header = "" }, "pubkey.header"},
		{"encoding", func(c *Config) { c.PubKey.Encoding = "b32" }, "pubkey.encoding"},
		{"not a key", func(c *Config) { c.Secrets = []string{"c2VjcmV0"} }, "secrets[0]"},
		{"key of another algorithm", func(c *Config) { c.Secrets = []string{pemKey(t, pub)} }, "secrets[0]"},
		{"rsa too short", func(c *Config) { c.PubKey.Algorithm, c.Secrets = "rsa-pss", []string{pemKey(t, &small.PublicKey)} }, "2048"},
		{"private key PEM", func(c *Config) {
			c.Secrets = []string{"-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"}
		}, "secrets[0]"},
		{"timestamp unsigned", func(c *Config) { c.PubKey.Template = "{body}" }, "must sign {timestamp}"},
		{"timestamp without header", func(c *Config) { c.PubKey.TimestampHeader = "" }, "needs pubkey.timestamp_header"},
		{"id in template", func(c *Config) { c.PubKey.Template = "{id}.{timestamp}{body}" }, "{id}"},
		{"unsigned id header", func(c *Config) { c.EventID = Field{Header: "X-Id"} }, "pubkey.allow_unsigned_id"},
		{"no event id", func(c *Config) { c.EventID = Field{} }, "event_id"},
	} {
		cfg := base
		tt.edit(&cfg)
		_, err := New(cfg)
		if err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: err = %v, want it to name %q", tt.name, err, tt.errHas)
		}
	}
}

// FuzzPubKeyVerify: with SendGrid's configuration, success means the
// signature verifies under the key by the standard library's own check,
// over the timestamp header's text and the body.
func FuzzPubKeyVerify(f *testing.F) {
	v, err := New(sendgridConfig())
	if err != nil {
		f.Fatal(err)
	}
	k, err := parsePublicKey("ecdsa-p256", sendgridPublicKey)
	if err != nil {
		f.Fatal(err)
	}
	key := k.(*ecdsa.PublicKey)
	f.Add(sendgridSignature, sendgridTimestamp, []byte(sendgridPayload))
	f.Add(sendgridSignature, "0"+sendgridTimestamp, []byte(sendgridPayload))
	f.Add(strings.Repeat("A", 88), sendgridTimestamp, []byte("{}"))
	f.Add("", "", []byte(nil))
	now := time.Unix(1588788367, 0)
	f.Fuzz(func(t *testing.T, sig, ts string, body []byte) {
		h := hdr("X-Twilio-Email-Event-Webhook-Signature", sig, "X-Twilio-Email-Event-Webhook-Timestamp", ts)
		_, err := v.Verify(&Request{Header: h, Body: body, Now: now})
		if err != nil {
			checkSentinel(t, err)
			return
		}
		raw, derr := base64.StdEncoding.DecodeString(sig)
		d := sha256.Sum256(append([]byte(ts), body...))
		ok := derr == nil && ecdsa.VerifyASN1(key, d[:], raw)
		if !ok && derr == nil && len(raw) == 64 {
			ok = ecdsa.Verify(key, d[:], new(big.Int).SetBytes(raw[:32]), new(big.Int).SetBytes(raw[32:]))
		}
		if !ok {
			t.Fatalf("accepted signature %q over %q", sig, ts)
		}
	})
}
