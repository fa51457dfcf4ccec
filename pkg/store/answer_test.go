package store_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/intakehq/intake/pkg/envelope"
)

// answerLiteral is an SQL comparison of the deliveries' answer column with
// a quoted value, as the store's queries and migrations spell it.
var answerLiteral = regexp.MustCompile(`(?i)\banswer\s*(?:=|<>|!=)\s*'([^']*)'`)

// The store's SQL keeps the answers as literals (a partial index's
// predicate must match its queries' text, and migrations never change):
// each must be an envelope.Answer, or a query would silently match nothing.
func TestSQLAnswersAreEnvelopeAnswers(t *testing.T) {
	known := map[string]bool{}
	for _, a := range []envelope.Answer{envelope.AnswerAccepted, envelope.AnswerDuplicate, envelope.AnswerUnavailable, envelope.AnswerRejected} {
		known[string(a)] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	migrations, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range append(files, migrations...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range answerLiteral.FindAllSubmatch(b, -1) {
			if !known[string(m[1])] {
				t.Errorf("%s: %s: %q is no envelope.Answer", f, m[0], m[1])
			}
			seen[string(m[1])] = true
		}
	}
	// The purge, its partial index and the receipt-gap check: if these are
	// not found, the pattern no longer sees the SQL.
	for _, a := range []envelope.Answer{envelope.AnswerAccepted, envelope.AnswerDuplicate} {
		if !seen[string(a)] {
			t.Errorf("no SQL compares answer with '%s'", a)
		}
	}
}
