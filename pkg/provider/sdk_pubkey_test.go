package provider

// Conformance of the public-key presets with their providers' Go code
// (test-only dependencies): discordgo's VerifyInteraction for discord,
// sendgrid-go's eventwebhook for sendgrid. Neither SDK signs (the sender
// holds the private key), so the test signs with a key of its own as the
// provider documents, and both verifiers judge the same requests.
// FuzzDiscordDifferential compares the two on fuzzed headers.

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"
)

var discordPriv = ed25519.NewKeyFromSeed([]byte("intake-discord-conformance-seed!"))

func discordHeader(ts, sig string) http.Header {
	return hdr("X-Signature-Ed25519", sig, "X-Signature-Timestamp", ts)
}

func discordSign(ts, body string) string {
	return hex.EncodeToString(ed25519.Sign(discordPriv, []byte(ts+body)))
}

func TestDiscordConformanceWithDiscordgo(t *testing.T) {
	pub := discordPriv.Public().(ed25519.PublicKey)
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	cfg := Config{Provider: "discord", Secrets: []string{hex.EncodeToString(other), hex.EncodeToString(pub)}, Tolerance: DefaultTolerance}
	v := newTestVerifier(t, cfg)
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	const body = `{"id":"1180000000000000000","type":2,"application_id":"11","data":{"name":"ping"}}`
	good := discordSign(ts, body)
	both := func(h http.Header, body string) (bool, error) {
		_, err := v.Verify(&Request{Header: h, Body: []byte(body), Now: now})
		return discordgo.VerifyInteraction(sdkRequest(h, body), pub), err
	}

	for _, sig := range []string{good, strings.ToUpper(good)} {
		theirs, err := both(discordHeader(ts, sig), body)
		if !theirs || err != nil {
			t.Fatalf("signed as Discord documents: discordgo %v, Intake %v", theirs, err)
		}
	}
	ping := `{"id":"1180000000000000001","type":1,"application_id":"11"}`
	if theirs, err := both(discordHeader(ts, discordSign(ts, ping)), ping); !theirs || err != nil {
		t.Fatalf("PING: discordgo %v, Intake %v", theirs, err)
	}

	for name, d := range map[string]struct {
		h    http.Header
		body string
	}{
		"tampered body":      {discordHeader(ts, good), body + " "},
		"tampered timestamp": {discordHeader(strconv.FormatInt(now.Unix()+1, 10), good), body},
		"another key":        {discordHeader(ts, hex.EncodeToString(ed25519.Sign(ed25519.NewKeyFromSeed(make([]byte, 32)), []byte(ts+body)))), body},
		"base64, not hex":    {discordHeader(ts, base64.StdEncoding.EncodeToString(ed25519.Sign(discordPriv, []byte(ts+body)))), body},
		"truncated":          {discordHeader(ts, good[:len(good)-2]), body},
		"no timestamp":       {with(discordHeader(ts, good), "X-Signature-Timestamp", ""), body},
		"no signature":       {with(discordHeader(ts, good), "X-Signature-Ed25519", ""), body},
	} {
		if theirs, err := both(d.h, d.body); theirs || err == nil {
			t.Errorf("%s: discordgo %v, Intake %v; want both to refuse", name, theirs, err)
		}
	}

	// Stricter than discordgo, which checks no time: Discord's docs ask
	// for the timestamp to be checked, and Intake keeps ± tolerance and a
	// canonical unix time.
	for _, ts := range []string{strconv.FormatInt(now.Add(-DefaultTolerance-time.Second).Unix(), 10), "0" + ts} {
		theirs, err := both(discordHeader(ts, discordSign(ts, body)), body)
		if !theirs || Reason(err) != "timestamp" {
			t.Errorf("timestamp %q: discordgo %v, Intake %v; want discordgo to accept, Intake to refuse (timestamp)", ts, theirs, err)
		}
	}
}

// FuzzDiscordDifferential: discordgo's VerifyInteraction against the
// discord preset. {ts} in the timestamp template is now; {sig} and {SIG}
// in the signature template are the real ed25519 signature (hex) of the
// timestamp and body. What Intake accepts, discordgo accepts; what discordgo
// accepts with a canonical unix timestamp (Intake's check, discordgo has
// none), Intake accepts.
func FuzzDiscordDifferential(f *testing.F) {
	pub := discordPriv.Public().(ed25519.PublicKey)
	v, err := New(Config{Provider: "discord", Secrets: []string{hex.EncodeToString(pub)}, Tolerance: DefaultTolerance})
	if err != nil {
		f.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	const ev = `{"id":"1","type":2}`
	f.Add("{ts}", "{sig}", []byte(ev))
	f.Add("{ts}", "{SIG}", []byte(`{"id":"2","type":1}`))
	f.Add("0{ts}", "{sig}", []byte(ev))
	f.Add("{ts}0", "{sig}", []byte(ev))
	f.Add("{ts}", "{sig} ", []byte(ev))
	f.Add("{ts}", "0x{sig}", []byte(ev))
	f.Add("{ts}", "{sig}", []byte(`{"type":2}`))
	f.Add("", "", []byte(nil))

	f.Fuzz(func(t *testing.T, tsTmpl, sigTmpl string, body []byte) {
		ts := strings.ReplaceAll(tsTmpl, "{ts}", strconv.FormatInt(now.Unix(), 10))
		s := discordSign(ts, string(body))
		sig := strings.NewReplacer("{sig}", s, "{SIG}", strings.ToUpper(s)).Replace(sigTmpl)
		h := discordHeader(ts, sig)
		_, err := v.Verify(&Request{Header: h, Body: body, Now: now})
		if err != nil {
			checkSentinel(t, err)
		}
		theirs := discordgo.VerifyInteraction(sdkRequest(h, string(body)), pub)
		if signatureAccepted(err) && !theirs {
			t.Fatalf("Intake accepted ts %q sig %q, discordgo refuses", ts, sig)
		}
		canonical := ts != "" && strings.Trim(ts, "0123456789") == "" && ts[0] != '0'
		if sec, perr := strconv.ParseInt(ts, 10, 64); perr != nil || now.Sub(time.Unix(sec, 0)).Abs() > DefaultTolerance {
			canonical = false
		}
		if theirs && canonical && !signatureAccepted(err) {
			t.Fatalf("discordgo accepted ts %q sig %q, Intake refuses: %v", ts, sig, err)
		}
	})
}

func TestSendGridConformanceWithSendGridGo(t *testing.T) {
	// sendgrid-go's own vector, through its own verifier and the preset.
	pub, err := eventwebhook.ConvertPublicKeyBase64ToECDSA(sendgridPublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := eventwebhook.VerifySignature(pub, []byte(sendgridPayload), sendgridSignature, sendgridTimestamp); !ok || err != nil {
		t.Fatalf("sendgrid-go refuses its own vector: %v, %v", ok, err)
	}
	sec, _ := strconv.ParseInt(sendgridTimestamp, 10, 64)
	vec := newTestVerifier(t, Config{Provider: "sendgrid", Secrets: []string{sendgridPublicKey}, Tolerance: DefaultTolerance})
	if _, err := vec.Verify(&Request{Body: []byte(sendgridPayload), Now: time.Unix(sec, 0),
		Header: hdr(eventwebhook.VerificationHTTPHeader, sendgridSignature, eventwebhook.TimestampHTTPHeader, sendgridTimestamp)}); err != nil {
		t.Fatalf("Intake refuses sendgrid-go's vector: %v", err)
	}

	// A key of the test's own: the verification key as SendGrid shows it
	// (base64 DER), a batch signed over {timestamp}{body} in ASN.1 DER.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	b64Key := base64.StdEncoding.EncodeToString(der)
	theirKey, err := eventwebhook.ConvertPublicKeyBase64ToECDSA(b64Key)
	if err != nil {
		t.Fatal(err)
	}
	v := newTestVerifier(t, Config{Provider: "sendgrid", Secrets: []string{b64Key}, Tolerance: DefaultTolerance})
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	const body = `[{"email":"a@example.com","timestamp":1700000000,"event":"delivered","sg_event_id":"sg-1","sg_message_id":"m.1"}]`
	sign := func(ts, body string) string {
		d := sha256.Sum256([]byte(ts + body))
		sig, err := ecdsa.SignASN1(rand.Reader, key, d[:])
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(sig)
	}
	good := sign(ts, body)
	both := func(sig, ts, body string) (bool, error) {
		ok, _ := eventwebhook.VerifySignature(theirKey, []byte(body), sig, ts)
		_, err := v.Verify(&Request{Body: []byte(body), Now: now,
			Header: hdr(eventwebhook.VerificationHTTPHeader, sig, eventwebhook.TimestampHTTPHeader, ts)})
		return ok, err
	}
	if ok, err := both(good, ts, body); !ok || err != nil {
		t.Fatalf("signed as SendGrid documents: sendgrid-go %v, Intake %v", ok, err)
	}
	wrong, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	d := sha256.Sum256([]byte(ts + body))
	wrongSig, _ := ecdsa.SignASN1(rand.Reader, wrong, d[:])
	for name, c := range map[string]struct{ sig, ts, body string }{
		"tampered body":      {good, ts, strings.Replace(body, "delivered", "bounce", 1)},
		"tampered timestamp": {good, strconv.FormatInt(now.Unix()+1, 10), body},
		"another key":        {base64.StdEncoding.EncodeToString(wrongSig), ts, body},
		"not base64":         {"!" + good, ts, body},
		"truncated":          {good[:len(good)-4], ts, body},
	} {
		if ok, err := both(c.sig, c.ts, c.body); ok || err == nil {
			t.Errorf("%s: sendgrid-go %v, Intake %v; want both to refuse", name, ok, err)
		}
	}

	// Where the two differ, knowingly: Intake's ecdsa-p256 also reads a raw
	// r‖s signature (SendGrid sends DER; either encodes the same signature),
	// and checks the timestamp, which sendgrid-go leaves to its caller.
	r, s, _ := ecdsa.Sign(rand.Reader, key, d[:])
	raw := base64.StdEncoding.EncodeToString(append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...))
	if ok, err := both(raw, ts, body); ok || err != nil {
		t.Errorf("raw r‖s: sendgrid-go %v, Intake %v; want sendgrid-go to refuse, Intake to accept", ok, err)
	}
	stale := strconv.FormatInt(now.Add(-DefaultTolerance-time.Second).Unix(), 10)
	if ok, err := both(sign(stale, body), stale, body); !ok || Reason(err) != "timestamp" {
		t.Errorf("stale: sendgrid-go %v, Intake %v; want sendgrid-go to accept, Intake to refuse", ok, err)
	}
}
