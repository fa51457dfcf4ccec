package envelope

import "testing"

func TestMsgIDIncludesHashPrefix(t *testing.T) {
	k := Key{Integration: "stripe-live", Account: "acct_1", EventID: "evt_1"}
	a := MsgID(k, PayloadSHA256([]byte(`{"a":1}`)))
	b := MsgID(k, PayloadSHA256([]byte(`{"a":2}`)))
	if a == b {
		t.Fatalf("different payloads share a message id %q", a)
	}
	if want := "stripe-live/acct_1/evt_1#"; a[:len(want)] != want {
		t.Fatalf("MsgID = %q, want prefix %q", a, want)
	}
	if len(a) != len("stripe-live/acct_1/evt_1#")+16 {
		t.Fatalf("MsgID = %q: want 16 hex characters of hash", a)
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
		"":             "unknown",
		"invoice.paid": "invoice_paid",
		"push":         "push",
		"a b*c>d\x01":  "a_b_c_d_",
		"customer-new": "customer-new",
	}
	for in, want := range tests {
		if got := Token(in); got != want {
			t.Errorf("Token(%q) = %q, want %q", in, got, want)
		}
	}
	if got := SubjectOut("acme", "stripe-live", "invoice.paid"); got != "intake.out.acme.stripe-live.invoice_paid" {
		t.Errorf("SubjectOut = %q", got)
	}
}

func FuzzToken(f *testing.F) {
	f.Add("invoice.paid")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		tok := Token(s)
		if tok == "" || len(tok) > maxTokenLength {
			t.Fatalf("Token(%q) = %q", s, tok)
		}
		for i := 0; i < len(tok); i++ {
			if !tokenByteOK(tok[i]) {
				t.Fatalf("Token(%q) = %q has forbidden byte %q", s, tok, tok[i])
			}
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
	}
	for in, want := range tests {
		if got := ValidID(in); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", in, got, want)
		}
	}
	if got := CleanType("a\r\nb"); got != "a__b" {
		t.Errorf("CleanType = %q", got)
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
