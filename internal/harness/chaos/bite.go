package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// A failover proves something only if it bit: commits were in flight when
// the primary died. The harness measures it twice, from the outside and
// from the processors, and a run where either shows nothing fails (see
// Result.checkFailover) rather than passing vacuously.

// failoverTail is how long after the promotion the processors' database
// failures still count as the failover's: their retries back off, and the
// ones that found no primary end once the multi-host URL finds the new one.
const failoverTail = 30 * time.Second

// The processor's log messages for a transient database failure it retries
// (processor.dbFailed; both count intake_processor_failures_total{kind="db"}).
const (
	dbFailedMsg   = "inbox transaction failed; retrying"
	dbReadOnlyMsg = "postgres is read-only (a standby, or failing over); holding the batch and reconnecting"
)

// dbFailuresLogged counts the processors' database-failure log lines
// stamped within [from, to]. The logs, not the metric: a processor's
// counters start again at zero when it is killed and restarted, its log
// file is appended to across restarts. -1 when a log cannot be read.
func (h *harness) dbFailuresLogged(from, to time.Time) int {
	n := 0
	for _, c := range h.procs {
		m, err := countLogged(c.logPath, from, to, dbFailedMsg, dbReadOnlyMsg)
		if err != nil {
			h.logf("database failures in %s: %v", c.logPath, err)
			return -1
		}
		n += m
	}
	return n
}

// countLogged counts the JSON log lines (slog) at path whose msg is one of
// msgs and whose time is within [from, to]; other lines (the harness's own
// start markers, a panic) are skipped.
func countLogged(path string, from, to time.Time, msgs ...string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	want := map[string]bool{}
	for _, m := range msgs {
		want[m] = true
	}
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var rec struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal(line, &rec) != nil || !want[rec.Msg] {
			continue
		}
		if !rec.Time.Before(from) && !rec.Time.After(to) {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// checkFailover fails a failover run that did not bite: the primary wrote
// no WAL between the cut and the kill (nothing was committing), the
// processors saw no database failure around it (no transaction was in
// flight at the kill), or, asynchronously, nothing was re-driven (no
// acknowledged commit was lost, or the re-drive did not bring it back).
// A measurement that could not be taken (-1) fails too: it proves nothing.
func (r *Result) checkFailover(o Options) {
	if !o.Failover || o.NoPostgresFault || r.PostgresFaults == 0 {
		return // no failover: checkFaults says so
	}
	switch {
	case r.WALAfterCut < 0:
		r.violate("the failover's bite is unknown: the primary's WAL written before its kill could not be read")
	case r.WALAfterCut == 0:
		r.violate("the failover did not bite: the primary wrote no WAL in the %s before its kill (no commit in flight)", standbyCut)
	}
	switch {
	case r.DBFailures < 0:
		r.violate("the failover's bite is unknown: the processors' logs could not be read for database failures")
	case r.DBFailures == 0:
		r.violate("the failover did not bite: the processors logged no database failure (%q) from the failover's start to %s after the promotion (no transaction in flight at the kill)",
			dbFailedMsg, failoverTail)
	}
	if o.Async {
		switch n := max(r.RedrivenAudit, r.RedrivenMetric); {
		case !r.RedriveConfigured:
			r.violate("the asynchronous failover proves nothing about lost commits: the replayer runs without the re-drive (this build's config has no api.redrive_interval)")
		case n <= 0:
			r.violate("the asynchronous failover did not bite: nothing was re-driven (intake.replays %d, %s %d), so no acknowledged commit was lost with the primary, or none came back",
				r.RedrivenAudit, redrivenMetric, r.RedrivenMetric)
		}
	}
}

// biteDetail is the failover's bite for the summary.
func (r *Result) biteDetail() string {
	wal := "unknown"
	if r.WALAfterCut >= 0 {
		wal = fmt.Sprintf("%d bytes", r.WALAfterCut)
	}
	dbf := "unknown"
	if r.DBFailures >= 0 {
		dbf = fmt.Sprint(r.DBFailures)
	}
	s := fmt.Sprintf("primary's WAL in the %s before its kill %s; processors' database failures logged from the failover's start to %s after the promotion %s",
		standbyCut, wal, failoverTail, dbf)
	switch {
	case !r.NoCut:
	case r.RedeliveredAtKill < 0:
		s += "; no cut: redelivered outcomes at the kill not measured"
	default:
		clean := "clean: no processor kill could add any"
		if !r.RedeliveredClean {
			clean = "an upper bound: a processor kill near the failover adds its own"
		}
		s += fmt.Sprintf("; no cut: %d redelivered outcomes on %d processors from the kill until they committed on the new primary "+
			"(commits that landed on the standby while their client saw the connection drop; %s)", r.RedeliveredAtKill, r.RedeliveredProcs, clean)
	}
	return s
}
