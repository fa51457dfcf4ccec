package envelope_test

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/intakehq/intake/pkg/envelope"
)

// TestSubjectsCollide checks SubjectsCollide against the nats-server's own
// answer for the same pairs, in both orders.
func TestSubjectsCollide(t *testing.T) {
	subjects := []string{
		"intake.in.>", "intake.in.stripe.>", "intake.in.stripe.invoice.paid", "intake.in.stripe.*",
		"intake.in.*.invoice.paid", "intake.in.github.push", "intake.in.*", "intake.in", ">", "*", "*.*",
		"intake.out.acme.>", "intake.in.stripe.invoice.*", "intake.in.stripe.invoice", "a", "a.b", "a.>", "a.*.c",
		"a.b.c", "*.b.>", "a.*.*",
	}
	for _, a := range subjects {
		for _, b := range subjects {
			want := server.SubjectsCollide(a, b)
			if got := envelope.SubjectsCollide(a, b); got != want {
				t.Errorf("SubjectsCollide(%q, %q) = %v, the nats-server says %v", a, b, got, want)
			}
		}
	}
}

func FuzzSubjectsCollide(f *testing.F) {
	f.Add("intake.in.>", "intake.in.stripe.*")
	f.Add("a.*.c", "a.b.>")
	f.Fuzz(func(t *testing.T, a, b string) {
		if !validFilter(a) || !validFilter(b) {
			return
		}
		if got, want := envelope.SubjectsCollide(a, b), server.SubjectsCollide(a, b); got != want {
			t.Errorf("SubjectsCollide(%q, %q) = %v, the nats-server says %v", a, b, got, want)
		}
	})
}

// validFilter is a subject filter a consumer may have: non-empty tokens
// without spaces, '*' and '>' only as whole tokens, '>' only last.
func validFilter(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	toks := 0
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			if c := s[i]; c <= ' ' || c >= 0x7f {
				return false
			}
			continue
		}
		tok := s[start:i]
		if tok == "" {
			return false
		}
		for j := 0; j < len(tok); j++ {
			if (tok[j] == '*' || tok[j] == '>') && len(tok) != 1 {
				return false
			}
		}
		if tok == ">" && i != len(s) {
			return false
		}
		toks++
		start = i + 1
	}
	return toks > 0
}
