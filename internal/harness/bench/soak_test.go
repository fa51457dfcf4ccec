package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWindowRows(t *testing.T) {
	for _, c := range []struct {
		d, interval time.Duration
		rows, want  int
	}{
		{30 * time.Minute, time.Minute, 30, 5},        // five minutes
		{10 * time.Minute, time.Minute, 10, 5},        // five minutes, half the run
		{3 * time.Minute, 18 * time.Second, 10, 2},    // a fifth
		{time.Minute, 15 * time.Second, 4, 1},         // at least one
		{30 * time.Minute, 10 * time.Second, 180, 30}, // five minutes of short rows
		{20 * time.Minute, 10 * time.Minute, 2, 1},    // never more than half
	} {
		if got := windowRows(c.d, c.interval, c.rows); got != c.want {
			t.Errorf("windowRows(%s, %s, %d) = %d, want %d", c.d, c.interval, c.rows, got, c.want)
		}
	}
}

func soakRows(n int, f func(i int, r *SoakRow)) []SoakRow {
	rows := make([]SoakRow, n)
	for i := range rows {
		rows[i] = SoakRow{Accepted: 1000, Processed: 1000, IngressRSS: 50, ProcRSS: 60,
			e2e:    []time.Duration{100 * time.Millisecond},
			Tables: []SoakTable{{Name: "outbox_pending", DeadTuples: 50000}, {Name: "inbox"}}}
		if f != nil {
			f(i, &rows[i])
		}
	}
	return rows
}

func TestJudgeSoak(t *testing.T) {
	for name, c := range map[string]struct {
		rows []SoakRow
		fail string // a substring of the failure, "" when it passes
	}{
		"steady": {rows: soakRows(10, nil)},
		"accepted falls": {rows: soakRows(10, func(i int, r *SoakRow) {
			if i >= 8 {
				r.Accepted = 850
			}
		}), fail: "accepted rate"},
		"processor falls behind": {rows: soakRows(10, func(i int, r *SoakRow) {
			if i >= 8 {
				r.Processed = 800
			}
		}), fail: "processed rate"},
		"e2e grows": {rows: soakRows(10, func(i int, r *SoakRow) {
			if i >= 8 {
				r.e2e = []time.Duration{200 * time.Millisecond}
			}
		}), fail: "end-to-end p99"},
		"memory grows": {rows: soakRows(10, func(i int, r *SoakRow) { r.ProcRSS = 60 + 10*float64(i) }), fail: "processor RSS"},
		// A low sample at the first window's end and a high one at the
		// last's is the collector's sawtooth, not growth.
		"memory saws": {rows: soakRows(10, func(i int, r *SoakRow) { r.ProcRSS = []float64{66, 50}[i%2] })},
		"a warning":   {rows: soakRows(10, func(i int, r *SoakRow) { r.Warnings = i / 9 }), fail: "1 warnings"},
		"dead tuples grow": {rows: soakRows(10, func(i int, r *SoakRow) { r.Tables[0].DeadTuples = int64(50000 * (i + 1)) }),
			fail: "dead tuples of outbox_pending"},
	} {
		t.Run(name, func(t *testing.T) {
			v := judgeSoak(c.rows, 2)
			line := v.Line()
			if c.fail == "" {
				if !v.OK {
					t.Fatalf("failed: %s", line)
				}
				return
			}
			if v.OK || !strings.Contains(line, c.fail) {
				t.Fatalf("want a failure naming %q, got: %s", c.fail, line)
			}
		})
	}
}

func TestSoakWarnings(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "processor.log")
	log := `{"time":"x","level":"INFO","msg":"ready"}
{"time":"x","level":"WARN","msg":"marking published outbox rows failed; will retry"}

{"time":"x","level":"ERROR","msg":"commit failed"}
panic: boom
`
	if err := os.WriteFile(p, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	n, first := soakWarnings([]string{p, filepath.Join(dir, "missing.log")})
	if n != 3 || len(first) != 3 || !strings.Contains(first[0], "marking published") {
		t.Fatalf("soakWarnings = %d, %q; want the WARN, the ERROR and the panic line", n, first)
	}
}

// A soak refuses a bad setting before it starts anything, naming the field.
func TestSoakConfigRefusesBadValues(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   SoakConfig
		field string
	}{
		{"negative duplicate window", SoakConfig{DuplicateWindow: -time.Minute}, "DuplicateWindow"},
		{"negative rate", SoakConfig{Rate: -1}, "Rate"},
		{"short run", SoakConfig{Duration: 30 * time.Second}, "Duration"},
	} {
		err := c.cfg.WithDefaults().validate()
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: got %v, want an error naming %s", c.name, err, c.field)
		}
	}
	if err := (SoakConfig{DuplicateWindow: 2 * time.Minute}).WithDefaults().validate(); err != nil {
		t.Errorf("a 2m window: %v", err)
	}
}
