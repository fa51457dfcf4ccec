package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/store"
)

// Postgres's cost per committed event: what one primary's size buys is
// events/s = its capacity / this. Measured around a processor drain (the
// normal stage and each --processors count), from just before the
// processor starts until the drain is committed and the outbox published:
// the WAL written, the CPU time of every postgres process (backends,
// WAL writer, checkpointer, autovacuum: all of them are the event's cost),
// and the growth of the tables the processor writes. Nothing else uses the
// cluster meanwhile.

// PGCost is Postgres's work per committed event during one drain.
type PGCost struct {
	Stage     string      `json:"stage"`
	Payload   int         `json:"payload_bytes"`
	Events    int         `json:"events"`
	WALBytes  float64     `json:"wal_bytes"`
	CPUMicros float64     `json:"cpu_us"`
	Tables    []TableCost `json:"tables"`
}

// TableCost is one table's growth per event. Rows are live rows (a row
// inserted and deleted in the drain, as outbox_pending's, counts 0 but
// its bytes stay until vacuum); index entries are those of live rows,
// partial indexes counted by their predicate; bytes are the table's
// (heap and TOAST) and its indexes', as the files grew.
type TableCost struct {
	Table        string  `json:"table"`
	Rows         float64 `json:"rows"`
	IndexEntries float64 `json:"index_entries"`
	TableBytes   float64 `json:"table_bytes"`
	IndexBytes   float64 `json:"index_bytes"`
}

// costTables are the tables a processor drain writes (forward handler).
var costTables = []string{"intake.inbox", "intake.deliveries", "intake.executions", "intake.outbox", "intake.outbox_pending"}

// pgMark is the cluster-wide counters at one instant.
type pgMark struct {
	wal int64         // bytes since 0/0 (pg_current_wal_lsn)
	cpu time.Duration // user + system time of the postmaster and its children
}

// tableSize is one table at one instant.
type tableSize struct {
	rows, entries, tableBytes, indexBytes int64
}

// markPG reads the WAL position and the CPU time of the postmaster pid and
// its children.
func markPG(ctx context.Context, st *store.Store, pid int) (pgMark, error) {
	var m pgMark
	cpu, err := postgresCPU(pid)
	if err != nil {
		return m, err
	}
	m.cpu = cpu
	if err := st.Pool().QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&m.wal); err != nil {
		return m, fmt.Errorf("wal position: %w", err)
	}
	return m, nil
}

// tableSizes reads rows, index entries and sizes of costTables, summed
// over a partitioned table's partitions (the outbox's days). It counts
// rows, so it runs outside the window markPG bounds.
func tableSizes(ctx context.Context, st *store.Store) (map[string]tableSize, error) {
	out := make(map[string]tableSize, len(costTables))
	for _, t := range costTables {
		// pg_partition_tree lists nothing for a table that is not partitioned.
		rows, err := st.Pool().Query(ctx, `SELECT relid::regclass::text FROM pg_partition_tree($1::regclass) WHERE isleaf
			UNION ALL SELECT $1::regclass::text WHERE NOT EXISTS (SELECT 1 FROM pg_partition_tree($1::regclass))`, t)
		if err != nil {
			return nil, fmt.Errorf("partitions of %s: %w", t, err)
		}
		leaves, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("partitions of %s: %w", t, err)
		}
		var s tableSize
		for _, leaf := range leaves {
			l, err := leafSize(ctx, st, leaf)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t, err)
			}
			s.rows += l.rows
			s.entries += l.entries
			s.tableBytes += l.tableBytes
			s.indexBytes += l.indexBytes
		}
		out[t] = s
	}
	return out, nil
}

// leafSize is tableSizes for one table that holds rows (a regclass's
// text: schema-qualified, quoted where needed).
func leafSize(ctx context.Context, st *store.Store, t string) (tableSize, error) {
	var s tableSize
	if err := st.Pool().QueryRow(ctx, `SELECT pg_table_size($1::regclass), pg_indexes_size($1::regclass)`, t).
		Scan(&s.tableBytes, &s.indexBytes); err != nil {
		return s, fmt.Errorf("size of %s: %w", t, err)
	}
	// t is the catalogue's own rendering of the relation's name.
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM `+t).Scan(&s.rows); err != nil {
		return s, fmt.Errorf("rows of %s: %w", t, err)
	}
	rows, err := st.Pool().Query(ctx, `SELECT coalesce(pg_get_expr(indpred, indrelid), '') FROM pg_index WHERE indrelid = $1::regclass`, t)
	if err != nil {
		return s, fmt.Errorf("indexes of %s: %w", t, err)
	}
	preds, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return s, fmt.Errorf("indexes of %s: %w", t, err)
	}
	for _, pred := range preds {
		if pred == "" {
			s.entries += s.rows
			continue
		}
		// The predicate is Postgres's own rendering of the index's
		// WHERE clause, from the catalogue.
		var n int64
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM `+t+` WHERE `+pred).Scan(&n); err != nil {
			return s, fmt.Errorf("index entries of %s: %w", t, err)
		}
		s.entries += n
	}
	return s, nil
}

// perEvent divides what changed between two marks and two table readings
// by the events committed in between.
func perEvent(stage string, size, events int, m0, m1 pgMark, t0, t1 map[string]tableSize) PGCost {
	c := PGCost{Stage: stage, Payload: size, Events: events}
	if events <= 0 {
		return c
	}
	n := float64(events)
	c.WALBytes = float64(m1.wal-m0.wal) / n
	c.CPUMicros = float64((m1.cpu - m0.cpu).Microseconds()) / n
	for _, t := range costTables {
		a, b := t0[t], t1[t]
		c.Tables = append(c.Tables, TableCost{Table: t,
			Rows:         float64(b.rows-a.rows) / n,
			IndexEntries: float64(b.entries-a.entries) / n,
			TableBytes:   float64(b.tableBytes-a.tableBytes) / n,
			IndexBytes:   float64(b.indexBytes-a.indexBytes) / n,
		})
	}
	return c
}

// pgWindow brackets one drain: open reads the tables then the counters,
// close the counters then the tables, so the harness's own counting stays
// outside the window.
type pgWindow struct {
	st   *store.Store
	pid  int
	m0   pgMark
	t0   map[string]tableSize
	open bool
}

func openPGWindow(ctx context.Context, st *store.Store, pid int) (*pgWindow, error) {
	w := &pgWindow{st: st, pid: pid}
	var err error
	if w.t0, err = tableSizes(ctx, st); err != nil {
		return nil, err
	}
	if w.m0, err = markPG(ctx, st, pid); err != nil {
		return nil, err
	}
	w.open = true
	return w, nil
}

// close waits (up to a minute) until the outbox is published — its
// deletes are the drain's cost too — and returns the cost per event.
func (w *pgWindow) close(ctx context.Context, stage string, size, events int) (PGCost, error) {
	if !w.open {
		return PGCost{}, errors.New("postgres cost window closed twice")
	}
	w.open = false
	if err := waitOutboxPublished(ctx, w.st, time.Minute); err != nil {
		return PGCost{}, err
	}
	m1, err := markPG(ctx, w.st, w.pid)
	if err != nil {
		return PGCost{}, err
	}
	t1, err := tableSizes(ctx, w.st)
	if err != nil {
		return PGCost{}, err
	}
	return perEvent(stage, size, events, w.m0, m1, w.t0, t1), nil
}

// waitOutboxPublished waits until no outbox row awaits publishing.
func waitOutboxPublished(ctx context.Context, st *store.Store, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		var n int64
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM intake.outbox_pending`).Scan(&n); err != nil {
			return fmt.Errorf("outbox pending: %w", err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d outbox rows still pending after %s", n, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every Linux
// architecture Go supports (sysconf(_SC_CLK_TCK) would need cgo).
const clockTicks = 100

// procTimes is what /proc/PID/stat says of a process's CPU, in clock ticks.
type procTimes struct {
	ppid           int
	utime, stime   uint64 // its own
	cutime, cstime uint64 // of its children it has waited for
}

// parseStat reads /proc/PID/stat. The command name in parentheses may hold
// spaces and parentheses, so fields are counted after the last ')': state
// is field 3 of proc(5), ppid 4, utime 14, stime 15, cutime 16, cstime 17.
func parseStat(b []byte) (procTimes, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procTimes{}, errors.New("stat: no command name")
	}
	f := bytes.Fields(b[i+1:])
	const first = 3 // f[0] is field 3
	if len(f) < 17-first+1 {
		return procTimes{}, fmt.Errorf("stat: %d fields after the command name", len(f))
	}
	var p procTimes
	var err error
	if p.ppid, err = strconv.Atoi(string(f[4-first])); err != nil {
		return procTimes{}, fmt.Errorf("stat: ppid: %w", err)
	}
	for _, v := range []struct {
		to    *uint64
		field int
	}{{&p.utime, 14}, {&p.stime, 15}, {&p.cutime, 16}, {&p.cstime, 17}} {
		// cutime and cstime are signed in proc(5); never negative in practice.
		n, err := strconv.ParseInt(string(f[v.field-first]), 10, 64)
		if err != nil || n < 0 {
			return procTimes{}, fmt.Errorf("stat: field %d %q", v.field, f[v.field-first])
		}
		*v.to = uint64(n)
	}
	return p, nil
}

// postgresTicks is the CPU time of the postmaster and its children, from
// each process's stat: the postmaster's own time and its live children's,
// plus the children it has reaped (backends that exited meanwhile: a
// postmaster waits for each of its children). Every postgres process is
// the postmaster's child, but not in its process group: each calls
// setsid() at start (InitPostmasterChild), so a group finds only the
// postmaster.
func postgresTicks(postmaster int, stats map[int]procTimes) uint64 {
	var t uint64
	for pid, p := range stats {
		switch {
		case pid == postmaster:
			t += p.utime + p.stime + p.cutime + p.cstime
		case p.ppid == postmaster:
			t += p.utime + p.stime
		}
	}
	return t
}

// postgresCPU is postgresTicks for the live processes under /proc.
func postgresCPU(leader int) (time.Duration, error) {
	if leader <= 0 {
		return 0, errors.New("postgres is not running")
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	stats := map[int]procTimes{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		if p, err := parseStat(b); err == nil {
			stats[pid] = p
		}
	}
	if _, ok := stats[leader]; !ok {
		return 0, fmt.Errorf("postmaster pid %d not in /proc", leader)
	}
	return time.Duration(postgresTicks(leader, stats)) * time.Second / clockTicks, nil
}

// printPGCosts writes the costs as two tables: the cluster's, then each
// table's.
func printPGCosts(w io.Writer, costs []PGCost) error {
	if len(costs) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "postgres per event, during\tpayload\tevents\tWAL bytes\tCPU µs (all postgres processes)")
	for _, c := range costs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.1f\n", c.Stage, c.Payload, c.Events, c.WALBytes, c.CPUMicros)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !slices.ContainsFunc(costs, func(c PGCost) bool { return len(c.Tables) > 0 }) {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "postgres per event, by table\tpayload\tlive rows\tindex entries\ttable bytes\tindex bytes")
	for _, c := range costs {
		for _, t := range c.Tables {
			fmt.Fprintf(tw, "%s: %s\t%d\t%.2f\t%.2f\t%.0f\t%.0f\n", c.Stage, t.Table, c.Payload, t.Rows, t.IndexEntries, t.TableBytes, t.IndexBytes)
		}
	}
	return tw.Flush()
}
