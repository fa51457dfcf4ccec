package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLongestPause(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ev := func(id string, ackMS int) *event {
		e := &event{id: id}
		e.first2xx.Store(at(ackMS).UnixNano())
		return e
	}
	processed := func(ms int) inboxRow { p := at(ms); return inboxRow{status: "processed", processedAt: &p} }

	for _, tc := range []struct {
		name   string
		events []*event
		inbox  map[string]inboxRow
		want   time.Duration
	}{
		{
			name:   "steady: each processed 10ms after its ack",
			events: []*event{ev("a", 0), ev("b", 100), ev("c", 200)},
			inbox:  map[string]inboxRow{"a": processed(10), "b": processed(110), "c": processed(210)},
			want:   10 * time.Millisecond,
		},
		{
			name:   "idle time without waiting events is no pause",
			events: []*event{ev("a", 0), ev("b", 5000)},
			inbox:  map[string]inboxRow{"a": processed(10), "b": processed(5020)},
			want:   20 * time.Millisecond,
		},
		{
			name:   "a stall: b and c wait from 100ms until 3s",
			events: []*event{ev("a", 0), ev("b", 100), ev("c", 150)},
			inbox:  map[string]inboxRow{"a": processed(10), "b": processed(3000), "c": processed(3001)},
			want:   2900 * time.Millisecond,
		},
		{
			name:   "processed before the client saw its 2xx",
			events: []*event{ev("a", 50), ev("b", 60)},
			inbox:  map[string]inboxRow{"a": processed(40), "b": processed(45)},
			want:   0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := longestPause(tc.events, tc.inbox); got != tc.want {
				t.Fatalf("longestPause = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestJudge feeds the verdict synthetic evidence with one of each
// violation it must catch.
func TestJudge(t *testing.T) {
	now := time.Now()
	acked := func(e *event) *event { e.first2xx.Store(now.UnixNano()); return e }
	v := func(n int64) *int64 { return &n }
	events := []*event{
		acked(&event{id: "ok", sha: "s1"}),
		acked(&event{id: "twice", sha: "s2"}),
		acked(&event{id: "lost", sha: "s3"}),
		acked(&event{id: "conf", kind: kindConflict, sha: "a", shaB: "b"}),
		acked(&event{id: "o1", kind: kindOrdered, sha: "o1", object: "x", version: 1}),
		acked(&event{id: "o2", kind: kindOrdered, sha: "o2", object: "x", version: 2}),
	}
	p := now.Add(time.Millisecond)
	row := func(status, sha string) inboxRow { return inboxRow{status: status, sha: sha, processedAt: &p} }
	one := func(id string) map[string]int { return map[string]int{id: 1} }
	ev := &evidence{
		effects: map[string][]effectRow{
			"ok":    {{id: 1, sha: "s1"}},
			"twice": {{id: 2, sha: "s2"}, {id: 3, sha: "s2"}},
			"conf":  {{id: 4, sha: "a"}},
			"o2":    {{id: 5, sha: "o2", version: v(2)}},
			"o1":    {{id: 6, sha: "o1", version: v(1)}}, // applied after the newer one
		},
		inbox: map[string]inboxRow{
			"ok": row("processed", "s1"), "twice": row("processed", "s2"), "conf": row("processed", "a"),
			"o1": row("processed", "o1"), "o2": row("processed", "o2"),
		},
		conflicts:   map[string][]conflictRow{}, // the conflict was not recorded
		objVersions: map[string]int64{"x": 2},
		out: map[string]map[string]int{
			"ok": one("m1"), "twice": one("m2"), "conf": one("m3"), "o1": one("m4"), "o2": one("m5"),
		},
		in: map[string]map[string]int{
			"ok": {"s1": 1}, "twice": {"s2": 1}, "lost": {"s3": 1}, "conf": {"a": 1, "b": 1}, "o1": {"o1": 1}, "o2": {"o2": 1},
		},
	}
	r := judge(Options{}, events, ev)
	if r.DuplicateEffects != 1 || r.Lost != 1 || r.ConflictsRecorded != 0 || r.Conflicts != 1 {
		t.Fatalf("duplicates %d, lost %d, conflicts %d/%d; want 1, 1, 0/1", r.DuplicateEffects, r.Lost, r.ConflictsRecorded, r.Conflicts)
	}
	all := strings.Join(r.Violations, "\n")
	for _, want := range []string{
		"duplicate business effects: 1 (e.g. twice ×2)",
		"lost: acknowledged but never applied: 1 (e.g. lost (no inbox row))",
		"conflict not recorded in intake.conflicts: 1 (e.g. conf)",
		"object version applied after a newer one: 1 (e.g. x v1 after v2)",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("violations lack %q:\n%s", want, all)
		}
	}
	if r.OK() {
		t.Fatal("a run with violations is OK")
	}
}

// TestJudgeOutboxByMessageID: INTAKE_OUT is judged by distinct Nats-Msg-Ids
// per event. A second copy under the same id (a relay re-publish, or a
// re-driven event's outbox message, past the duplicate window) is counted
// apart and is no violation: subscribers deduplicate by Nats-Msg-Id. Two
// ids for one event are: a subscriber would apply it twice.
func TestJudgeOutboxByMessageID(t *testing.T) {
	for _, tc := range []struct {
		name       string
		out        map[string]int // Nats-Msg-Id → copies of the one event
		repeats    int
		violations []string
	}{
		{"one id, one copy", map[string]int{"m1": 1}, 0, nil},
		{"one id, repeated past the window", map[string]int{"m1": 3}, 2, nil},
		{"two ids", map[string]int{"m1": 1, "m2": 1}, 0, []string{"several outbox message ids on INTAKE_OUT for one event: 1 (e.g. e ×2)"}},
		{"none", map[string]int{}, 0, []string{"applied but missing on INTAKE_OUT: 1 (e.g. e)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &event{id: "e", kind: kindPlain, sha: "s"}
			e.first2xx.Store(time.Now().UnixNano())
			p := time.Now()
			ev := &evidence{
				effects:   map[string][]effectRow{"e": {{id: 1, sha: "s"}}},
				inbox:     map[string]inboxRow{"e": {status: "processed", sha: "s", processedAt: &p}},
				conflicts: map[string][]conflictRow{}, objVersions: map[string]int64{},
				out: map[string]map[string]int{"e": tc.out},
				in:  map[string]map[string]int{"e": {"s": 1}},
			}
			r := judge(Options{}, []*event{e}, ev)
			if r.OutSameIDRepeats != tc.repeats {
				t.Errorf("same-id repeats %d, want %d", r.OutSameIDRepeats, tc.repeats)
			}
			if strings.Join(r.Violations, "\n") != strings.Join(tc.violations, "\n") {
				t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(r.Violations, "\n"), strings.Join(tc.violations, "\n"))
			}
		})
	}
}

// TestJudgeOutputOfALostCommit: an event on INTAKE_OUT that the database
// does not record as applied is a violation — except, with asynchronous
// replication only, a re-driven event the ordering guard judged stale: its
// first execution was published and lost with the primary.
func TestJudgeOutputOfALostCommit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		async     bool
		redriven  bool
		lost      int
		violation bool
	}{
		{"async, re-driven, stale", true, true, 1, false},
		{"async, never re-driven", true, false, 0, true},
		{"synchronous replication", false, true, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &event{id: "e", kind: kindPlain, sha: "s"}
			e.first2xx.Store(time.Now().UnixNano())
			p := time.Now()
			ev := &evidence{
				effects:   map[string][]effectRow{},
				inbox:     map[string]inboxRow{"e": {status: "stale", sha: "s", processedAt: &p}},
				conflicts: map[string][]conflictRow{}, objVersions: map[string]int64{},
				out:      map[string]map[string]int{"e": {"m1": 1}},
				in:       map[string]map[string]int{"e": {"s": 1}},
				redriven: map[string]bool{"e": tc.redriven},
			}
			r := judge(Options{Failover: true, Async: tc.async}, []*event{e}, ev)
			if r.OutFromLostCommits != tc.lost {
				t.Errorf("outputs of lost commits %d, want %d", r.OutFromLostCommits, tc.lost)
			}
			got := strings.Contains(strings.Join(r.Violations, "\n"), "on INTAKE_OUT but never applied")
			if got != tc.violation {
				t.Errorf("violations %q; want the INTAKE_OUT one: %v", r.Violations, tc.violation)
			}
		})
	}
}

// TestCheckFailover: a failover that did not bite — no WAL written between
// the cut and the kill, no database failure seen by the processors, or
// (async) nothing re-driven — fails the run, as does one whose bite could
// not be measured; one that bit passes.
func TestCheckFailover(t *testing.T) {
	bit := func() Result {
		return Result{PostgresFaults: 1, PostgresRejoins: 1, WALAfterCut: 1 << 20, DBFailures: 12,
			RedriveConfigured: true, RedrivenAudit: 30, RedrivenMetric: 30}
	}
	for _, tc := range []struct {
		name  string
		o     Options
		edit  func(r *Result)
		wants []string // substrings of the violations; none: passes
	}{
		{"sync, bit", Options{Failover: true}, func(*Result) {}, nil},
		{"async, bit", Options{Failover: true, Async: true}, func(*Result) {}, nil},
		{"no WAL after the cut", Options{Failover: true}, func(r *Result) { r.WALAfterCut = 0 },
			[]string{"the failover did not bite: the primary wrote no WAL"}},
		{"WAL unknown", Options{Failover: true}, func(r *Result) { r.WALAfterCut = -1 },
			[]string{"the failover's bite is unknown: the primary's WAL"}},
		{"no database failure", Options{Failover: true}, func(r *Result) { r.DBFailures = 0 },
			[]string{"the processors logged no database failure"}},
		{"logs unreadable", Options{Failover: true}, func(r *Result) { r.DBFailures = -1 },
			[]string{"the processors' logs could not be read"}},
		{"both", Options{Failover: true}, func(r *Result) { r.WALAfterCut, r.DBFailures = 0, 0 },
			[]string{"no WAL", "no database failure"}},
		{"async, nothing re-driven", Options{Failover: true, Async: true},
			func(r *Result) { r.RedrivenAudit, r.RedrivenMetric = 0, 0 }, []string{"nothing was re-driven (intake.replays 0"}},
		{"async, only the metric answers", Options{Failover: true, Async: true},
			func(r *Result) { r.RedrivenAudit = -1 }, nil},
		{"async, no re-drive configured", Options{Failover: true, Async: true},
			func(r *Result) { r.RedriveConfigured = false }, []string{"runs without the re-drive"}},
		{"sync, nothing re-driven is fine", Options{Failover: true},
			func(r *Result) { r.RedrivenAudit, r.RedrivenMetric = 0, 0 }, nil},
		{"no failover happened: checkFaults' to say", Options{Failover: true},
			func(r *Result) { *r = Result{} }, nil},
		{"not a failover run", Options{}, func(r *Result) { *r = Result{PostgresFaults: 1} }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := bit()
			tc.edit(&r)
			r.checkFailover(tc.o)
			all := strings.Join(r.Violations, "\n")
			if len(r.Violations) != len(tc.wants) {
				t.Fatalf("violations:\n%s\nwant %d: %q", all, len(tc.wants), tc.wants)
			}
			for _, want := range tc.wants {
				if !strings.Contains(all, want) {
					t.Errorf("violations lack %q:\n%s", want, all)
				}
			}
		})
	}
}

func TestCountLogged(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC)
	line := func(sec int, msg string) string {
		return fmt.Sprintf(`{"time":%q,"level":"WARN","msg":%q,"attempt":1}`, t0.Add(time.Duration(sec)*time.Second).Format(time.RFC3339Nano), msg)
	}
	path := filepath.Join(t.TempDir(), "processor-1.log")
	log := strings.Join([]string{
		"=== chaos: start intake [bench chaos-processor] at …",
		line(1, dbFailedMsg), // before the window
		line(10, dbFailedMsg),
		line(11, dbReadOnlyMsg),
		line(12, "handler failed; will retry"),
		"panic: not JSON",
		line(40, dbFailedMsg), // the window's last moment
		line(41, dbFailedMsg), // after it
	}, "\n") + "\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := countLogged(path, t0.Add(10*time.Second), t0.Add(40*time.Second), dbFailedMsg, dbReadOnlyMsg)
	if err != nil || n != 3 {
		t.Fatalf("countLogged = %d, %v; want 3", n, err)
	}
	if _, err := countLogged(filepath.Join(t.TempDir(), "missing.log"), t0, t0, dbFailedMsg); err == nil {
		t.Fatal("a missing log counted")
	}
}
