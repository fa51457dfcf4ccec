package bench

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       procTimes
		err        string
	}{
		{name: "backend",
			stat: "4242 (postgres) S 4200 4200 4200 0 -1 4194560 1200 0 0 0 731 152 9 3 20 0 1 0 5000 230000000 4000 18446744073709551615\n",
			want: procTimes{ppid: 4200, utime: 731, stime: 152, cutime: 9, cstime: 3}},
		{name: "command name with spaces and parentheses",
			stat: "17 (post (gres) x) R 1 17 17 0 -1 0 0 0 0 0 5 6 7 8 20 0 1 0 1 1 1",
			want: procTimes{ppid: 1, utime: 5, stime: 6, cutime: 7, cstime: 8}},
		{name: "no command name", stat: "17 postgres R 1 17", err: "no command name"},
		{name: "cut short", stat: "17 (postgres) R 1 17 17 0 -1 0 0 0 0 0 5 6", err: "fields after"},
		{name: "ppid not a number", stat: "17 (postgres) R x 17 17 0 -1 0 0 0 0 0 5 6 7 8 20", err: "ppid"},
		{name: "negative time", stat: "17 (postgres) R 1 17 17 0 -1 0 0 0 0 0 5 6 -7 8 20", err: "field 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.stat))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseStat = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseStatReadsThisProcess(t *testing.T) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc:", err)
	}
	p, err := parseStat(b)
	if err != nil {
		t.Fatal(err)
	}
	if p.ppid != os.Getppid() {
		t.Errorf("ppid %d, want %d", p.ppid, os.Getppid())
	}
}

// TestPostgresTicks: the postmaster counts its own time and its reaped
// children's, its live children their own; nobody else counts, nor do the
// children's children.
func TestPostgresTicks(t *testing.T) {
	stats := map[int]procTimes{
		100: {ppid: 1, utime: 10, stime: 5, cutime: 40, cstime: 2}, // postmaster
		101: {ppid: 100, utime: 300, stime: 60, cutime: 1000},      // a backend: its reaped children are not counted
		102: {ppid: 100, utime: 1, stime: 1},
		103: {ppid: 100},
		200: {ppid: 1, utime: 5000, stime: 5000}, // someone else
		201: {ppid: 101, utime: 70, stime: 70},   // a backend's child
	}
	if got, want := postgresTicks(100, stats), uint64(10+5+40+2+300+60+1+1); got != want {
		t.Errorf("postgresTicks = %d, want %d", got, want)
	}
	if got := postgresTicks(300, stats); got != 0 {
		t.Errorf("postgresTicks of an absent postmaster = %d", got)
	}
}

func TestPerEvent(t *testing.T) {
	m0 := pgMark{wal: 1 << 30, cpu: 2 * time.Second}
	m1 := pgMark{wal: 1<<30 + 4_000_000, cpu: 2*time.Second + 300*time.Millisecond}
	t0 := map[string]tableSize{"intake.inbox": {rows: 0, entries: 0, tableBytes: 8192, indexBytes: 32768}}
	t1 := map[string]tableSize{
		"intake.inbox":          {rows: 1000, entries: 4000, tableBytes: 8192 + 500_000, indexBytes: 32768 + 250_000},
		"intake.outbox_pending": {rows: 0, tableBytes: 90_000, indexBytes: 40_000},
	}
	c := perEvent("intake processor", 1024, 1000, m0, m1, t0, t1)
	if c.WALBytes != 4000 || c.CPUMicros != 300 || c.Events != 1000 || c.Payload != 1024 {
		t.Errorf("per event: %+v", c)
	}
	if len(c.Tables) != len(costTables) {
		t.Fatalf("%d tables, want %d", len(c.Tables), len(costTables))
	}
	byName := map[string]TableCost{}
	for _, tc := range c.Tables {
		byName[tc.Table] = tc
	}
	if got := byName["intake.inbox"]; got != (TableCost{Table: "intake.inbox", Rows: 1, IndexEntries: 4, TableBytes: 500, IndexBytes: 250}) {
		t.Errorf("inbox: %+v", got)
	}
	// Inserted and deleted: no live rows, the bytes stay.
	if got := byName["intake.outbox_pending"]; got.Rows != 0 || got.TableBytes != 90 || got.IndexBytes != 40 {
		t.Errorf("outbox_pending: %+v", got)
	}
	if got := perEvent("none", 1024, 0, m0, m1, t0, t1); got.WALBytes != 0 || len(got.Tables) != 0 {
		t.Errorf("no events: %+v", got)
	}
}
