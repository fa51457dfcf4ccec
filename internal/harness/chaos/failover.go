package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.yaml.in/yaml/v3"

	"github.com/intakehq/intake/internal/harness/pgcluster"
	"github.com/intakehq/intake/internal/harness/scrape"
	"github.com/intakehq/intake/pkg/config"
)

// Postgres with Options.Failover: a primary and a streaming standby, two
// servers that every role and the harness reach through one multi-host URL
// with target_session_attrs=read-write, so each finds the primary after a
// failover by itself, as behind a managed database's endpoint.

// The servers' names: their application_name as a standby, the name
// synchronous_standby_names lists.
const (
	firstPrimary = "pg_a"
	firstStandby = "pg_b"
)

// standbyCut is how long the standby receives nothing before the primary
// dies: the commits of that time are on the primary only.
const standbyCut = 2 * time.Second

// Re-drive settings of the run's replayer (api.redrive_interval,
// api.redrive_lookback), and how long the settle waits for it to bring back
// acknowledged events the inbox lacks.
const (
	redriveInterval = 5 * time.Second
	redriveLookback = 2 * time.Minute
	redriveGrace    = 6 * redriveInterval
)

// pgServer is one Postgres server of the run.
type pgServer struct {
	*pgcluster.Cluster
	name string // as a standby (synchronous_standby_names)
}

// rewindable are the settings pg_rewind (Follow) needs from a server's
// first start, on both servers: either may be the one rewound.
func rewindable() []string {
	return []string{"wal_log_hints=on", "full_page_writes=on", "wal_keep_size=1GB"}
}

// startPair starts the primary and a standby cloned from it (pg_basebackup).
// With synchronous replication the primary names the standby in
// synchronous_standby_names from its first start, so even CREATE DATABASE
// waits for it.
func (h *harness) startPair(ctx context.Context) error {
	settings := rewindable()
	mode := "asynchronous"
	if !h.o.Async {
		settings = append(settings, "synchronous_standby_names="+firstStandby, "synchronous_commit=on")
		mode = "synchronous"
	}
	// Fast (fsync off) as in a single-server run; full_page_writes back on
	// (rewindable) for pg_rewind.
	a, err := pgcluster.Start(ctx, pgcluster.Options{Dir: h.path("postgres-" + firstPrimary), Fast: true, Settings: settings})
	if err != nil {
		return fmt.Errorf("chaos: primary: %w", err)
	}
	h.pg = &pgServer{a, firstPrimary}
	h.pgAll = []*pgcluster.Cluster{a}
	// The standby's own settings leave synchronous_standby_names out: set on
	// the command line it would win over the ALTER SYSTEM that names the
	// old primary once it rejoins.
	b, err := pgcluster.StartStandby(ctx, a, firstStandby,
		pgcluster.Options{Dir: h.path("postgres-" + firstStandby), Fast: true, Settings: rewindable()})
	if err != nil {
		return fmt.Errorf("chaos: standby: %w", err)
	}
	h.standby = &pgServer{b, firstStandby}
	h.pgAll = append(h.pgAll, b)
	h.logf("postgres: primary %s (port %d), %s streaming standby %s (port %d)", firstPrimary, a.Port(), mode, firstStandby, b.Port())
	return nil
}

// postgresURL is database's URL for every client of the run: the one
// server's, or with Failover the multi-host URL over both.
func (h *harness) postgresURL(database string) string {
	if h.o.Failover {
		return pgcluster.MultiHostURL(database, h.pgAll...)
	}
	return h.pg.URL(database)
}

// failover fails the primary over to the standby. The standby is cut off
// first, so the primary dies with commits the standby never saw: with
// synchronous replication they hang waiting for it and their outcome is
// unknown to the processors (the inbox resolves them on redelivery); with
// asynchronous replication they were acknowledged and are lost with the
// primary (the re-drive brings their events back).
//
// Cut off, not paused (SIGSTOP): a paused standby's socket still takes in
// the WAL the primary streams (megabytes on loopback), and the standby
// reads it once resumed, so the commits of the pause survive the primary.
func (f *faults) failover(ctx context.Context) error {
	h := f.h
	primary, standby := h.pg, h.standby
	if standby == nil {
		return errors.New("failover: no standby")
	}
	start, progress := time.Now(), f.progress()
	from := walPosition(ctx, primary)
	var resume func() error
	if h.o.NoCut {
		h.stepf("failover: standby %s stays connected (no cut): the primary dies in %s with commits in flight",
			standby.name, standbyCut)
	} else {
		if err := cutReplication(ctx, standby); err != nil {
			return fmt.Errorf("failover: %w", err)
		}
		h.stepf("failover: standby %s cut off (primary_conninfo emptied, its walreceiver gone) for %s: commits from now on reach the primary only",
			standby.name, standbyCut)
	}
	if h.o.NoCut {
		f.sleep(ctx, standbyCut-walReceiverPause)
		// The commits of the pause wait for the standby's answer while
		// their WAL piles up in its socket: they land once it resumes.
		var err error
		if resume, err = pauseWalReceiver(ctx, standby); err != nil {
			return fmt.Errorf("failover: %w", err)
		}
		h.stepf("failover: standby %s's walreceiver paused (SIGSTOP) for %s: commits wait for its answer, their WAL in its socket",
			standby.name, walReceiverPause)
		f.sleep(ctx, walReceiverPause)
	} else {
		f.sleep(ctx, standbyCut)
	}
	written := walSince(ctx, primary, from)
	var before map[string]procCount
	if h.o.NoCut {
		before = f.redeliveredNow(ctx)
	}
	if err := primary.Kill(); err != nil {
		if resume != nil {
			_ = resume()
		}
		return fmt.Errorf("failover: kill %s: %w", primary.name, err)
	}
	killedAt := time.Now()
	if resume != nil {
		if err := resume(); err != nil {
			return fmt.Errorf("failover: %w", err)
		}
		received := waitReceived(ctx, standby)
		h.stepf("failover: standby %s's walreceiver resumed (SIGCONT): it wrote what its socket held, received up to %s, before the promotion",
			standby.name, received)
	}
	f.mu.Lock()
	f.pgFaults++
	f.cutAt, f.walAfterCut = start, written
	f.mu.Unlock()
	if h.o.NoCut {
		h.stepf("failover: primary %s killed (SIGKILL) with %s of WAL written in the last %s, commits waiting for the paused standby", primary.name, walBytes(written), standbyCut)
	} else {
		h.stepf("failover: primary %s killed (SIGKILL) with %s of WAL written since the cut, none of it on the standby", primary.name, walBytes(written))
	}
	if err := standby.Promote(ctx); err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	promoted := time.Now()
	f.mu.Lock()
	f.promotedAt = promoted
	f.mu.Unlock()
	h.stepf("failover: %s promoted: the primary now (the multi-host URL finds it)", standby.name)
	h.pg, h.standby, h.fallen = standby, nil, primary
	what := fmt.Sprintf("failover (%s replication): standby %s cut off %s, primary %s killed (kill -9), %s promoted",
		h.replication(), standby.name, standbyCut, primary.name, standby.name)
	if h.o.NoCut {
		what = fmt.Sprintf("failover (%s replication, no cut): primary %s killed (kill -9) with standby %s connected, %s promoted",
			h.replication(), primary.name, standby.name, standby.name)
		f.countRedelivered(ctx, before, killedAt, promoted)
	}
	f.record(start, progress, what)
	return nil
}

// walReceiverPause is how long, with NoCut, the standby's walreceiver is
// paused before the primary dies: long enough for commits to wait on it.
const walReceiverPause = 500 * time.Millisecond

// pauseWalReceiver stops (SIGSTOP) the standby's walreceiver; resume
// continues it. Paused, its socket still takes in the primary's WAL, and it
// writes that once resumed: what the primary sent before it died survives.
func pauseWalReceiver(ctx context.Context, standby *pgServer) (resume func() error, err error) {
	var pid int
	// A walreceiver between connections has no row: wait for one.
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = poll(wait, 100*time.Millisecond, func() error {
		return queryPrimary(wait, standby, "SELECT pid FROM pg_stat_wal_receiver WHERE pid IS NOT NULL", nil, &pid)
	})
	if err != nil {
		return nil, fmt.Errorf("pause %s's walreceiver: %w", standby.name, err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("pause %s's walreceiver (pid %d): %w", standby.name, pid, err)
	}
	return func() error {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			return fmt.Errorf("resume %s's walreceiver (pid %d): %w", standby.name, pid, err)
		}
		return nil
	}, nil
}

// waitReceived waits (up to 10s) until the standby's received WAL position
// stands still twice 200ms apart, and returns it.
func waitReceived(ctx context.Context, standby *pgServer) string {
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	last, same := "", 0
	_ = poll(wait, 200*time.Millisecond, func() error {
		var lsn string
		if err := queryPrimary(wait, standby, "SELECT coalesce(pg_last_wal_receive_lsn()::text, '')", nil, &lsn); err != nil {
			return err
		}
		if lsn == last {
			same++
		} else {
			last, same = lsn, 0
		}
		if same < 2 {
			return errors.New("still receiving")
		}
		return nil
	})
	return last
}

// procCount is one processor's counter at a moment, and the process it
// came from: a restarted processor's counters start again at zero.
type procCount struct {
	pid int
	n   int
}

// redeliveredNow reads every running processor's redelivered outcomes
// (intake_processor_messages_total{outcome="redelivered"}).
func (f *faults) redeliveredNow(ctx context.Context) map[string]procCount {
	counts := map[string]procCount{}
	for _, c := range f.h.procs {
		pid := c.Pid()
		n, err := metricSumWhere(ctx, c.addr(), processedMetric, map[string]string{"outcome": "redelivered"})
		if err == nil && c.Running() && c.Pid() == pid {
			counts[c.name] = procCount{pid, n}
		}
	}
	return counts
}

// Processor metrics NoCut reads.
const (
	processedMetric  = "intake_processor_messages_total"
	lastCommitMetric = "intake_processor_last_commit_timestamp_seconds"
)

// countRedelivered measures, with NoCut, the commits that landed before
// their connection died: a processor whose commit reached the standby yet
// saw the connection drop retries it on the new primary, whose inbox
// answers Redelivered. It waits (up to failoverTail) until every processor
// read before the kill has committed on the new primary, and counts the
// redelivered outcomes they added meanwhile. The count is clean when no
// processor was killed from an ack deadline before the kill until then —
// such a kill's messages come back as Redelivered too.
func (f *faults) countRedelivered(ctx context.Context, before map[string]procCount, killedAt, promoted time.Time) {
	h := f.h
	wait, cancel := context.WithTimeout(ctx, failoverTail)
	defer cancel()
	_ = poll(wait, 250*time.Millisecond, func() error {
		for _, c := range h.procs {
			if _, ok := before[c.name]; !ok {
				continue
			}
			last, err := metricSum(wait, c.addr(), lastCommitMetric)
			// Whole seconds: a commit in the promotion's second may be
			// from before the kill.
			if err != nil || int64(last) <= promoted.Unix() {
				return fmt.Errorf("%s has not committed on the new primary", c.name)
			}
		}
		return nil
	})
	after := f.redeliveredNow(ctx)
	n, read := 0, 0
	for name, b := range before {
		if a, ok := after[name]; ok && a.pid == b.pid {
			n += a.n - b.n
			read++
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.redeliveredAtKill, f.redeliveredProcs = n, read
	f.redeliveredClean = true
	for _, k := range f.killTimes {
		if k.After(killedAt.Add(-h.o.AckWait)) {
			f.redeliveredClean = false
		}
	}
	h.stepf("failover: %d redelivered outcomes on %d processors from the kill until they committed on the new primary (clean of processor kills: %v)",
		n, read, f.redeliveredClean)
}

// cutReplication ends the standby's WAL stream for good: with
// primary_conninfo empty its walreceiver exits, dropping whatever its
// socket holds, and no new one starts.
func cutReplication(ctx context.Context, standby *pgServer) error {
	conn, err := pgx.Connect(ctx, standby.URL("postgres"))
	if err != nil {
		return fmt.Errorf("cut %s off: %w", standby.name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET primary_conninfo = ''"); err != nil {
		return fmt.Errorf("cut %s off: %w", standby.name, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("cut %s off: %w", standby.name, err)
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = poll(wait, 20*time.Millisecond, func() error {
		var n int
		if err := conn.QueryRow(wait, "SELECT count(*) FROM pg_stat_wal_receiver").Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return errors.New("walreceiver still running")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cut %s off: %w", standby.name, err)
	}
	return nil
}

// walPosition is the primary's current WAL position ("" when it does not
// answer); walSince how many bytes of WAL it wrote since then (-1 when it
// does not answer): the verdict's evidence that commits were in flight.
func walPosition(ctx context.Context, primary *pgServer) string {
	var lsn string
	_ = queryPrimary(ctx, primary, "SELECT pg_current_wal_lsn()::text", nil, &lsn)
	return lsn
}

func walSince(ctx context.Context, primary *pgServer, from string) int64 {
	var n int64
	if from == "" || queryPrimary(ctx, primary, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint", []any{from}, &n) != nil {
		return -1
	}
	return n
}

func walBytes(n int64) string {
	if n < 0 {
		return "an unknown amount"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// queryPrimary allows 5s: the primary is busy, and an unanswered query
// fails the verdict (an unknown bite).
func queryPrimary(ctx context.Context, primary *pgServer, sql string, args []any, dest ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, primary.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.QueryRow(ctx, sql, args...).Scan(dest...)
}

// rejoin brings the killed primary back as a standby of the new one
// (pg_rewind, then streaming) and, with synchronous replication, makes it
// the new primary's synchronous standby.
func (f *faults) rejoin(ctx context.Context) error {
	h := f.h
	old := h.fallen
	if old == nil {
		return errors.New("rejoin: no failed primary (the failover did not happen)")
	}
	start, progress := time.Now(), f.progress()
	if err := old.Follow(ctx, h.pg.Cluster, old.name); err != nil {
		return fmt.Errorf("rejoin: %w", err)
	}
	h.stepf("rejoin: old primary %s rewound (pg_rewind) and streaming from %s", old.name, h.pg.name)
	what := fmt.Sprintf("old primary %s rewound (pg_rewind), standby of %s", old.name, h.pg.name)
	if !h.o.Async {
		if err := setSynchronousStandby(ctx, h.pg, old.name); err != nil {
			return fmt.Errorf("rejoin: %w", err)
		}
		h.stepf("rejoin: %s is %s's synchronous standby (ALTER SYSTEM, pg_reload_conf)", old.name, h.pg.name)
		what += ", its synchronous standby"
	}
	h.standby, h.fallen = old, nil
	f.mu.Lock()
	f.pgRejoins++
	f.mu.Unlock()
	f.record(start, progress, what)
	return nil
}

// setSynchronousStandby makes name the synchronous standby of primary.
func setSynchronousStandby(ctx context.Context, primary *pgServer, name string) error {
	conn, err := pgx.Connect(ctx, primary.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// ALTER SYSTEM takes no parameters; name is checked by pgcluster
	// (lower-case letters, digits, _) and ours.
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '"+name+"'"); err != nil {
		return fmt.Errorf("set synchronous_standby_names on %s: %w", primary.name, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("reload %s: %w", primary.name, err)
	}
	return nil
}

func (h *harness) replication() string {
	if h.o.Async {
		return "asynchronous"
	}
	return "synchronous"
}

// stepf logs one step of a Postgres fault with the wall clock, to match
// with the servers' logs.
func (h *harness) stepf(format string, args ...any) {
	h.logf("%s [%s UTC]", fmt.Sprintf(format, args...), time.Now().UTC().Format("15:04:05.000"))
}

// redriveKeysKnown reports whether this build's config knows the re-drive
// keys (api.redrive_interval, api.redrive_lookback). The config loader
// rejects unknown keys, so the harness writes them only when known: the
// child processes run the same build (`intake bench chaos` its own binary,
// the tests one built from this tree).
func redriveKeysKnown() bool {
	dec := yaml.NewDecoder(strings.NewReader("redrive_interval: 5s\nredrive_lookback: 2m\n"))
	dec.KnownFields(true)
	var api config.API
	return dec.Decode(&api) == nil
}

// apiYAML is the run config's api section (Failover): the replayer's token
// and its re-drive settings.
func (h *harness) apiYAML() string {
	s := fmt.Sprintf(`api:
  tokens: [{name: chaos, token: %q, role: operator}]
  # The re-drive: events on INTAKE_IN the inbox lacks (a commit lost with a
  # failed-over primary) are published again.
`, h.apiToken)
	keys := fmt.Sprintf("redrive_interval: %s\n  redrive_lookback: %s\n", yamlDuration(redriveInterval), yamlDuration(redriveLookback))
	if h.redrive {
		return s + "  " + keys
	}
	// TODO(redrive): this build's config does not know the keys yet (the
	// loader rejects unknown keys); redriveKeysKnown turns them on.
	return s + "  # TODO(redrive): not known to this build's config yet\n  # " + strings.ReplaceAll(keys, "\n  ", "\n  # ")
}

// yamlDuration writes whole minutes as "2m" rather than "2m0s".
func yamlDuration(d time.Duration) string {
	if d >= time.Minute && d%time.Minute == 0 {
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return d.String()
}

// redriveCount is how many events the re-drive published, from the replays
// audit table and from the replayer's metrics (-1 where there is no answer).
func (h *harness) redriveCount(ctx context.Context) (audit, metric int) {
	audit, metric = -1, -1
	if n, err := redrivenFromAudit(ctx, h.db); err == nil {
		audit = n
	} else {
		h.logf("re-drive count from intake.replays: %v", err)
	}
	if h.replayer != nil {
		if n, err := redrivenFromMetrics(ctx, h.replayer.addr()); err == nil {
			metric = n
		} else {
			h.logf("re-drive count from the replayer's metrics: %v", err)
		}
	}
	return audit, metric
}

// redrivenFromAudit counts the events the re-drive published, from its
// records in intake.replays: replays requested_by "redrive"
// (replayer.RedriveRequester, which this package's base predates) with a
// reason starting "redrive (… pass)"; either matches.
func redrivenFromAudit(ctx context.Context, db *pgxpool.Pool) (int, error) {
	var n int
	err := db.QueryRow(ctx, `SELECT coalesce(sum(published), 0)::bigint FROM intake.replays
		WHERE requested_by ~* 're-?drive' OR reason ~* 're-?drive'`).Scan(&n)
	return n, err
}

// redrivenMetric is the replayer's counter of re-driven events.
const redrivenMetric = "intake_redriven_events_total"

// redrivePassesMetric counts the replayer's completed re-drive passes.
const redrivePassesMetric = "intake_redrive_passes_total"

// redrivenFromMetrics reads redrivenMetric (summed over its labels) from
// the replayer's /metrics; an error when the replayer does not export it.
func redrivenFromMetrics(ctx context.Context, addr string) (int, error) {
	return metricSum(ctx, addr, redrivenMetric)
}

// metricSum reads metric (summed over its labels) from /metrics at addr;
// an error when it is not exported.
func metricSum(ctx context.Context, addr, metric string) (int, error) {
	return metricSumWhere(ctx, addr, metric, nil)
}

// metricSumWhere is metricSum over the series whose labels include every
// one of match (nil: all). A metric exported without a matching series
// sums to 0.
func metricSumWhere(ctx context.Context, addr, metric string, match map[string]string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	fams, err := scrape.Families(ctx, "http://"+addr+"/metrics")
	if err != nil {
		return 0, err
	}
	sum, exported := scrape.Sum(fams, metric, match)
	if !exported {
		return 0, fmt.Errorf("%s not exported", metric)
	}
	return int(sum), nil
}
