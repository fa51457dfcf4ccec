package provider

// Conformance with twilio-go's RequestValidator (test-only dependency) and
// with vectors signed by twilio-node (testdata/twilio): Twilio's
// documented example, what Intake signs, the URL with and without its
// default port, repeated names.

import (
	"crypto/sha1"
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
	"time"

	twilioclient "github.com/twilio/twilio-go/client"
)

func TestTwilioConformanceWithTwilioGo(t *testing.T) {
	rv := twilioclient.NewRequestValidator(twilioToken)
	cfg := Config{Provider: "twilio", Secrets: []string{"old", twilioToken}, PublicURL: twilioURL}
	v := newTestVerifier(t, cfg)
	form := func(caller string) string {
		return "CallSid=CA1234567890ABCDE&Caller=" + strings.ReplaceAll(caller, "+", "%2B") + "&Digits=1234&From=" + strings.ReplaceAll(caller, "+", "%2B") + "&To=%2B18005551212"
	}
	check := func(t *testing.T, publicURL, body, sig string, wantGo, wantIntake bool) {
		t.Helper()
		if got := rv.ValidateBody(publicURL, []byte(body), sig); got != wantGo {
			t.Errorf("twilio-go ValidateBody = %v, want %v", got, wantGo)
		}
		c := cfg
		c.PublicURL = publicURL
		_, err := newTestVerifier(t, c).Verify(&Request{Header: hdr("X-Twilio-Signature", sig, "I-Twilio-Idempotency-Token", "idem"), Body: []byte(body)})
		if (err == nil) != wantIntake {
			t.Errorf("Intake: %v, want accepted %v", err, wantIntake)
		}
	}

	t.Run("Twilio's documented example, both editions", func(t *testing.T) {
		check(t, twilioURL, form("+12349013030"), "0/KCTR6DLpKmkAf8muzZqo1nDgQ=", true, true)
		check(t, twilioURL, form("+14158675310"), "GvWf1cFY/Q7PnoempGyD5oXAezc=", true, true)
	})

	t.Run("ours signs, twilio-go verifies", func(t *testing.T) {
		body := "AccountSid=AC1&MessageSid=SM1&MessageStatus=delivered&To=%2B15558675310&ErrorCode="
		h, err := Sign(cfg, 1, "idem-1", []byte(body), time.Unix(1_700_000_000, 0))
		if err != nil {
			t.Fatal(err)
		}
		if !rv.ValidateBody(twilioURL, []byte(body), h.Get("X-Twilio-Signature")) {
			t.Fatal("twilio-go refuses what Intake signs")
		}
		if _, err := v.Verify(&Request{Header: h, Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("both refuse", func(t *testing.T) {
		doc := "0/KCTR6DLpKmkAf8muzZqo1nDgQ="
		check(t, twilioURL, strings.Replace(form("+12349013030"), "1234&", "1235&", 1), doc, false, false)
		check(t, "https://mycompany.com/myapp.php", form("+12349013030"), doc, false, false)
		check(t, "https://mycompany.com/myapp.php?foo=1&bar=3", form("+12349013030"), doc, false, false)
		check(t, twilioURL, form("+12349013030"), base64.StdEncoding.EncodeToString(macOf(sha1.New, "54321", twilioSignedText(twilioURL, nil))), false, false)
	})

	// The vector that found the bug: Twilio's back end may sign the URL with
	// its default port written (or without the port configured), and
	// twilio-go and twilio-node accept both spellings. Intake refused these
	// until twilioURLs; testdata/twilio has twilio-node's own vectors.
	t.Run("the URL with and without its default port", func(t *testing.T) {
		body := form("+14158675310")
		withPort := "https://mycompany.com:443/myapp.php?foo=1&bar=2"
		params, _ := url.ParseQuery(body)
		overPort := base64.StdEncoding.EncodeToString(macOf(sha1.New, twilioToken, twilioSignedText(withPort, params)))
		check(t, twilioURL, body, overPort, true, true)
		check(t, withPort, body, "GvWf1cFY/Q7PnoempGyD5oXAezc=", true, true)
		// Another port is another URL, to both.
		other := base64.StdEncoding.EncodeToString(macOf(sha1.New, twilioToken, twilioSignedText("https://mycompany.com:8443/myapp.php?foo=1&bar=2", params)))
		check(t, twilioURL, body, other, false, false)
	})

	// Repeated names: twilio-go signs the first value of each name only,
	// twilio-node every distinct value sorted; Intake every value sorted (as
	// twilio-node for distinct values). No documented Twilio request repeats
	// a name.
	t.Run("a repeated name: twilio-go reads its first value only", func(t *testing.T) {
		body := form("+14158675310") + "&To=%2B18005550000"
		h, err := Sign(cfg, 1, "idem-1", []byte(body), time.Unix(1_700_000_000, 0))
		if err != nil {
			t.Fatal(err)
		}
		check(t, twilioURL, body, h.Get("X-Twilio-Signature"), false, true)
	})
}

func TestTwilioURLs(t *testing.T) {
	for in, want := range map[string]string{
		"https://a.example/x":           "https://a.example:443/x",
		"https://a.example?x=1":         "https://a.example:443?x=1",
		"http://a.example":              "http://a.example:80",
		"https://a.example:443/x":       "https://a.example/x",
		"https://a.example:8443/x?y=:1": "https://a.example/x?y=:1",
		"http://[::1]:80/a":             "http://[::1]/a",
		"http://[::1]/a":                "http://[::1]:80/a",
	} {
		if got := twilioURLs(in); len(got) != 2 || got[0] != in || got[1] != want {
			t.Errorf("twilioURLs(%q) = %q, want [%q %q]", in, got, in, want)
		}
	}
}
