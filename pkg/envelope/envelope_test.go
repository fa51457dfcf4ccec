package envelope

import (
	"strings"
	"testing"
	"time"
)

func TestDeliveryMsgIDIncludesHashPrefix(t *testing.T) {
	k := Key{Integration: "stripe-live", Account: "acct_1", EventID: "evt_1"}
	a := DeliveryMsgID(k, PayloadSHA256([]byte(`{"a":1}`)))
	b := DeliveryMsgID(k, PayloadSHA256([]byte(`{"a":2}`)))
	if a == b {
		t.Fatalf("different payloads share a message id %q", a)
	}
	if want := "stripe-live/acct_1/evt_1#"; a[:len(want)] != want {
		t.Fatalf("DeliveryMsgID = %q, want prefix %q", a, want)
	}
	if len(a) != len("stripe-live/acct_1/evt_1#")+16 {
		t.Fatalf("DeliveryMsgID = %q: want 16 hex characters of hash", a)
	}
}

func TestParseKey(t *testing.T) {
	tests := []struct {
		in   string
		want Key
		ok   bool
	}{
		{"gh/org/1234", Key{"gh", "org", "1234"}, true},
		{"gh//1234", Key{"gh", "", "1234"}, true},
		{"gh/acct/a/b/c", Key{"gh", "acct", "a/b/c"}, true},
		{"gh/acct", Key{}, false},
		{"/a/b", Key{}, false},
		{"gh/acct/", Key{}, false},
	}
	for _, tt := range tests {
		got, ok := ParseKey(tt.in)
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParseKey(%q) = %+v, %v; want %+v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
		if ok && got.String() != tt.in {
			t.Errorf("round trip %q -> %q", tt.in, got.String())
		}
	}
}

func TestToken(t *testing.T) {
	tests := map[string]string{
		"":               "unknown",
		"invoice.paid":   "invoice%2Epaid",
		"invoice_paid":   "invoice_paid",
		"push":           "push",
		"orders/create":  "orders/create",
		"a b*c>d\x01":    "a%20b%2Ac%3Ed%01",
		"customer-new":   "customer-new",
		"100%":           "100%25",
		"ünï":            "%C3%BCn%C3%AF",
		"a%2Eb":          "a%252Eb",
		"app_rate_limit": "app_rate_limit",
	}
	for in, want := range tests {
		if got := Token(in); got != want {
			t.Errorf("Token(%q) = %q, want %q", in, got, want)
		}
		if back, ok := ParseToken(Token(in)); in != "" && (!ok || back != in) {
			t.Errorf("ParseToken(%q) = %q, %v; want %q", Token(in), back, ok, in)
		}
	}
	if got := SubjectOut("acme", "stripe-live", "invoice.paid"); got != "intake.out.acme.stripe-live.invoice%2Epaid" {
		t.Errorf("SubjectOut = %q", got)
	}
}

// The collisions of the old mapping, which replaced every forbidden byte
// with '_' and cut at 128 bytes: each pair routed two event types to one
// subject.
func TestTokenIsInjective(t *testing.T) {
	long := strings.Repeat("a", 128)
	for _, pair := range [][2]string{
		{"a.b", "a_b"}, {"a b", "a*b"}, {"x>", "x_"}, {long + "1", long + "2"}, {"%2E", "."},
	} {
		if Token(pair[0]) == Token(pair[1]) {
			t.Errorf("Token(%q) = Token(%q) = %q", pair[0], pair[1], Token(pair[0]))
		}
	}
	for _, bad := range []string{"", "a.b", "a b", "%", "%2", "%2e", "%41", "%zz"} {
		if _, ok := ParseToken(bad); ok {
			t.Errorf("ParseToken(%q) accepted a string Token never writes", bad)
		}
	}
}

func FuzzToken(f *testing.F) {
	f.Add("invoice.paid", "invoice_paid")
	f.Add("", "unknown")
	f.Add("%", "%25")
	f.Fuzz(func(t *testing.T, a, b string) {
		tok := Token(a)
		if tok == "" {
			t.Fatalf("Token(%q) is empty", a)
		}
		for i := 0; i < len(tok); i++ {
			if !tokenByteOK(tok[i]) {
				t.Fatalf("Token(%q) = %q has forbidden byte %q", a, tok, tok[i])
			}
		}
		if back, ok := ParseToken(tok); a != "" && (!ok || back != a) {
			t.Fatalf("ParseToken(Token(%q)) = %q, %v", a, back, ok)
		}
		if a != b && a != "" && b != "" && tok == Token(b) {
			t.Fatalf("Token(%q) = Token(%q) = %q", a, b, tok)
		}
		if s, ok := ParseToken(b); ok && Token(s) != b {
			t.Fatalf("ParseToken(%q) = %q, but Token of that is %q", b, s, Token(s))
		}
	})
}

func TestValidID(t *testing.T) {
	long := make([]byte, MaxIDBytes+1)
	for i := range long {
		long[i] = 'a'
	}
	tests := map[string]bool{
		"evt_1": true, "a/b": true, "ünïcode": true, "": false, "a\nb": false, "a\x00": false,
		string(long): false, string(long[:MaxIDBytes]): true, "\xff": false,
		// C1 controls, bidirectional controls and line separators: the CLI
		// prints ids raw, and "evt_\u202egnp.exe" reads as another id.
		"evt\u0085": false, "evt\u009b31m": false, "evt_\u202egnp": false, "\u2066x\u2069": false,
		"a\u200fb": false, "a\u061cb": false, "a\u2028b": false, "a\x7f": false, "a\u00a0b": true,
		// Characters that show as nothing: "evt_1" and "evt\u200b_1" would
		// read as one id in a terminal or the console.
		"evt\u200b_1": false, "evt\u200c_1": false, "evt\u200d_1": false, "evt\u2060_1": false,
		"evt\u2064_1": false, "\ufeffevt_1": false, "evt\u00ad_1": false, "evt\u180e_1": false,
		"evt\u2065_1": true, "evt_\u00e9": true,
	}
	for in, want := range tests {
		if got := ValidID(in); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", in, got, want)
		}
	}
	if got := CleanType("a\r\nb"); got != "a__b" {
		t.Errorf("CleanType = %q", got)
	}
	if got := CleanType("a\u202eb\u0085"); got != "a_b_" {
		t.Errorf("CleanType = %q", got)
	}
	if ValidType("a\u202eb") || !ValidType("") || !ValidType("invoice.paid") {
		t.Error("ValidType")
	}
}

func TestIsSubjectIn(t *testing.T) {
	for _, c := range []struct {
		subject, integration string
		want                 bool
	}{
		{"intake.in.demo.invoice_paid", "demo", true},
		{"intake.in.demo.a.b", "demo", true},
		{SubjectIn("demo", "invoice.paid"), "demo", true},
		{"intake.in.other.invoice_paid", "demo", false},
		{"intake.in.demo2.invoice_paid", "demo", false},
		{"intake.in.demo.", "demo", false},
		{"intake.in.demo", "demo", false},
		{"intake.out.acme.demo.x", "demo", false},
	} {
		if got := IsSubjectIn(c.subject, c.integration); got != c.want {
			t.Errorf("IsSubjectIn(%q, %q) = %v, want %v", c.subject, c.integration, got, c.want)
		}
	}
}

func TestBoundRetryHints(t *testing.T) {
	huge := strings.Repeat("9", 64<<10)
	in := map[string]string{
		"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout",
		"X-Huge": huge, "X-Ctl": "a\nb", "": "x", "X-A": "1", "X-B": "2", "X-C": "3",
	}
	got := BoundRetryHints(in)
	if len(got) != MaxRetryHints {
		t.Fatalf("kept %d hints, want %d: %v", len(got), MaxRetryHints, got)
	}
	for k, v := range got {
		if len(k) > MaxRetryHintBytes || len(v) > MaxRetryHintBytes || v == huge || strings.ContainsAny(v, "\n") {
			t.Fatalf("kept %q=%q", k, v)
		}
	}
	if BoundRetryHints(map[string]string{"X": huge}) != nil {
		t.Fatal("a hint over the bound was kept")
	}

	// A forged message or receipt cannot store more than the bound either.
	d := NewDelivery(Key{"i", "a", "e"}, "t", "x", []byte("{}"), time.Unix(0, 0))
	d.RetryHints = map[string]string{"X-Huge": huge, "X-Slack-Retry-Num": "2"}
	m := d.Msg()
	if h := m.Header.Get(HeaderRetryHints); len(h) > 200 {
		t.Fatalf("message carries %d bytes of hints", len(h))
	}
	m.Header.Set(HeaderRetryHints, `{"X-Huge":"`+huge+`","X-Slack-Retry-Num":"2"}`)
	back, err := ParseDelivery(m.Header, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.RetryHints) != 1 || back.RetryHints["X-Slack-Retry-Num"] != "2" {
		t.Fatalf("parsed hints %v", back.RetryHints)
	}
	r, err := ParseReceipt([]byte(`{"id":"r","key":"i/a/e","status_code":200,"retry_hints":{"X-Huge":"` + huge + `"}}`))
	if err != nil || len(r.RetryHints) != 0 {
		t.Fatalf("receipt hints %v, %v", r.RetryHints, err)
	}
}

// The INTAKE_OUT filters, as pkg/subscriber and the replayer spelt them by
// hand before: a durable's filter on the server must not change.
func TestSubjectOutFilters(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{SubjectOutPrefix("acme") + ">", "intake.out.acme.>"},
		{SubjectOutPrefix("acme.eu") + ">", "intake.out.acme%2Eeu.>"},
		{SubjectOutFilter("acme", "stripe-live"), "intake.out.acme.stripe-live.>"},
		{SubjectOutFilter("", "stripe-live"), "intake.out.*.stripe-live.>"},
		{SubjectOutFilter("acme", ""), "intake.out.acme.*.>"},
		{SubjectOutFilter("", ""), "intake.out.*.*.>"},
		{SubjectOutFilter("acme.eu", "a b"), "intake.out.acme%2Eeu.a%20b.>"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	if !SubjectsCollide(SubjectOutFilter("acme", "stripe-live"), SubjectOut("acme", "stripe-live", "invoice.paid")) {
		t.Error("SubjectOutFilter does not match the subject SubjectOut makes")
	}
	for filter, want := range map[string]bool{
		SubjectOutAll: true, "intake.out.acme.>": true, SubjectOutFilter("", "x"): true,
		SubjectInAll: false, "intake.outbox.x": false, "": false,
	} {
		if got := IsSubjectOutFilter(filter); got != want {
			t.Errorf("IsSubjectOutFilter(%q) = %v, want %v", filter, got, want)
		}
	}
}
