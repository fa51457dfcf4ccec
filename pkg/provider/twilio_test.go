package provider

import (
	"crypto/sha1"
	"errors"
	"net/url"
	"strings"
	"testing"
)

// Twilio's documented examples ("Validating requests"): auth token 12345,
// the URL and the parameters below; two editions of the page, two
// signatures.
const (
	twilioToken = "12345"
	twilioURL   = "https://mycompany.com/myapp.php?foo=1&bar=2"
)

func TestTwilioVerify(t *testing.T) {
	cfg := Config{Provider: "twilio", Secrets: []string{"old", twilioToken}, PublicURL: twilioURL}
	v := newTestVerifier(t, cfg)
	form := func(caller string) string {
		return "CallSid=CA1234567890ABCDE&Caller=" + url.QueryEscape(caller) + "&Digits=1234&From=" + url.QueryEscape(caller) + "&To=%2B18005551212"
	}
	for _, tt := range []struct {
		name, body, sig string
		id              string
		err             error
	}{
		{"Twilio's documented example", form("+12349013030"), "0/KCTR6DLpKmkAf8muzZqo1nDgQ=", "tok-1", nil},
		{"its newer edition", form("+14158675310"), "GvWf1cFY/Q7PnoempGyD5oXAezc=", "tok-1", nil},
		{"the parameters in another order", "To=%2B18005551212&Digits=1234&Caller=%2B12349013030&From=%2B12349013030&CallSid=CA1234567890ABCDE", "0/KCTR6DLpKmkAf8muzZqo1nDgQ=", "tok-1", nil},
		{"a changed digit", strings.Replace(form("+12349013030"), "1234&", "1235&", 1), "0/KCTR6DLpKmkAf8muzZqo1nDgQ=", "tok-1", ErrBadSignature},
		{"no signature", form("+12349013030"), "", "tok-1", ErrMissingHeader},
		{"unpadded base64", form("+12349013030"), "0/KCTR6DLpKmkAf8muzZqo1nDgQ", "tok-1", nil},
		{"a bad escape", "CallSid=%zz", "0/KCTR6DLpKmkAf8muzZqo1nDgQ=", "tok-1", ErrBadSignature},
		{"no idempotency token", form("+12349013030"), "0/KCTR6DLpKmkAf8muzZqo1nDgQ=", "", ErrMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := hdr("X-Twilio-Signature", tt.sig, "I-Twilio-Idempotency-Token", tt.id)
			ev, err := v.Verify(&Request{Header: h, Body: []byte(tt.body)})
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Verify = %+v, %v; want %v", ev, err, tt.err)
				}
				return
			}
			if err != nil || ev.ID != tt.id || ev.SecretIndex != 1 {
				t.Fatalf("Verify = %+v, %v", ev, err)
			}
		})
	}
	// Another URL is another signed text: a Host header cannot move it.
	other := newTestVerifier(t, Config{Provider: "twilio", Secrets: []string{twilioToken}, PublicURL: "https://mycompany.com/myapp.php"})
	if _, err := other.Verify(&Request{Header: hdr("X-Twilio-Signature", "0/KCTR6DLpKmkAf8muzZqo1nDgQ=", "I-Twilio-Idempotency-Token", "t"),
		Body: []byte(form("+12349013030"))}); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("another URL: %v", err)
	}
	if _, err := New(Config{Provider: "twilio", Secrets: []string{"x"}}); err == nil || !strings.Contains(err.Error(), "public_url") {
		t.Fatalf("no public_url: %v", err)
	}
	if WeakAlgorithm(cfg) != "sha1" {
		t.Fatal("twilio is not reported as sha1")
	}
	// Repeated names: the values sorted, each after its name (twilio-go).
	if got := twilioSignedText("u", url.Values{"b": {"2", "1"}, "a": {"x"}}); got != "uaxb1b2" {
		t.Fatalf("signed text %q", got)
	}
}

// FuzzTwilioVerify: success means the signature is the MAC of the URL (as
// configured, or with :443 written, as Twilio's SDKs also accept it) and the
// sorted parameters as encoding/url reads the body.
func FuzzTwilioVerify(f *testing.F) {
	f.Add("CallSid=CA1234567890ABCDE&Caller=%2B12349013030&Digits=1234&From=%2B12349013030&To=%2B18005551212", "0/KCTR6DLpKmkAf8muzZqo1nDgQ=")
	f.Add("a=1&a=2&b", "x")
	v, err := New(Config{Provider: "twilio", Secrets: []string{twilioToken}, PublicURL: twilioURL})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body, sig string) {
		_, err := v.Verify(&Request{Header: hdr("X-Twilio-Signature", sig, "I-Twilio-Idempotency-Token", "t"), Body: []byte(body)})
		if err != nil {
			checkSentinel(t, err)
			return
		}
		params, perr := url.ParseQuery(body)
		var raw [22]byte
		if perr != nil || !decodeMAC(raw[:], sig, 20, true) {
			t.Fatalf("accepted %q with %q", body, sig)
		}
		// The MAC over public_url or its other port spelling (twilioURLs).
		for _, u := range []string{twilioURL, "https://mycompany.com:443/myapp.php?foo=1&bar=2"} {
			if string(raw[:20]) == string(macOf(sha1.New, twilioToken, twilioSignedText(u, params))) {
				return
			}
		}
		t.Fatalf("accepted %q with %q", body, sig)
	})
}
