package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/intakehq/intake/internal/harness/pgcluster"
)

// The SQL handler stage: what a one-INSERT SQL handler (handlers: in the
// config, processor.SQLHandler) costs the processor against Forward. Both
// drain the same backlog on the run's own stream and database, its tables
// emptied before each (cleanTables), published as ingress publishes
// (fillBacklog), in the order Forward, SQL handler, SQL handler, Forward,
// so that drift on the host moves both alike. The handler forwards too (forward: true), so the INSERT is the
// only difference. Its statement returns no rows, so the processor queues
// it with the batch's writes (Event.Queue): one more statement in the
// batch's round trip, no round trip of its own.

// sqlBenchDDL is the SQL handler's business table.
const sqlBenchDDL = `CREATE SCHEMA IF NOT EXISTS bench;
CREATE TABLE IF NOT EXISTS bench.payments (key text PRIMARY KEY, body jsonb NOT NULL)`

// sqlBenchHandler is the stage's handlers: section.
const sqlBenchHandler = `handlers:
  - name: payments
    sql: "INSERT INTO bench.payments (key, body) VALUES (:key, :body)"
    forward: true
`

// sqlBenchShare: each drain's backlog lasts Duration/sqlBenchShare at the
// rate the processor drained ingress's backlog, so the stage adds about
// Duration and four processor start-ups to a run (--quick: 5s or so).
const sqlBenchShare = 4

// sqlHandlerStage measures the SQL handler against Forward and records
// both figures, for the ratio.
func (p *payloadRun) sqlHandlerStage(ctx context.Context, pg *pgcluster.Cluster) error {
	if _, err := p.st.Pool().Exec(ctx, sqlBenchDDL); err != nil {
		return fmt.Errorf("SQL handler table: %w", err)
	}
	backlog := max(int(p.procRate*p.c.Duration.Seconds()/sqlBenchShare), 1000)
	// Forward, SQL handler, SQL handler, Forward; runs[0] Forward's, runs[1]
	// the handler's.
	order := []bool{false, true, true, false}
	var runs [2][]procsRun
	for i, sql := range order {
		r, err := p.drainSQL(ctx, pg, backlog, sql, i)
		if err != nil {
			return err
		}
		k := map[bool]int{false: 0, true: 1}[sql]
		runs[k] = append(runs[k], r)
	}
	names := [2]string{"intake processor, forward (SQL pair)", "intake processor, SQL handler"}
	for k, rs := range runs {
		var events, secs, batch, rss float64
		costs := make([]PGCost, len(rs))
		for i, r := range rs {
			events, secs = events+r.rate*r.secs, secs+r.secs
			batch += r.meanBatch / float64(len(rs))
			rss = max(rss, r.peakRSS)
			costs[i] = r.cost
		}
		rate := events / secs
		note := fmt.Sprintf("backlog %d, %d drains; %.0f per tx", backlog, len(rs), batch)
		if k == 1 {
			p.sqlRate = rate
			note = "one INSERT (key, jsonb body) queued with the batch, then forward; " + note
		} else {
			p.sqlFwdRate = rate
		}
		p.add(Figure{Stage: names[k], Payload: p.size, Rate: rate, RSSMB: rss, Note: note})
		p.rep.Postgres = append(p.rep.Postgres, mergeCosts(costs))
	}
	return nil
}

// drainSQL drains backlog events, published afresh, into emptied tables:
// one processor with the SQL handler, or with Forward.
func (p *payloadRun) drainSQL(ctx context.Context, pg *pgcluster.Cluster, backlog int, sql bool, pass int) (procsRun, error) {
	kind, stage := "fwd", "intake processor, forward (SQL pair)"
	if sql {
		kind, stage = "sql", "intake processor, SQL handler"
	}
	if err := cleanTables(ctx, p.st); err != nil {
		return procsRun{}, err
	}
	if _, err := p.st.Pool().Exec(ctx, `TRUNCATE bench.payments`); err != nil {
		return procsRun{}, err
	}
	cfg, err := os.ReadFile(p.cfgPath)
	if err != nil {
		return procsRun{}, err
	}
	if sql {
		cfg = append(cfg, sqlBenchHandler...)
	}
	tag := fmt.Sprintf("%s-%d-%d", kind, p.size, pass)
	cfgPath := filepath.Join(p.dir, "intake-"+tag+".yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return procsRun{}, err
	}
	if err := fillBacklog(ctx, p.js, p.size, backlog, fmt.Sprintf("%s_%d", tag, time.Now().UnixNano())); err != nil {
		return procsRun{}, err
	}
	pgw, err := openPGWindow(ctx, p.st, pg.PID())
	if err != nil {
		return procsRun{}, err
	}
	proc, base, err := p.startRoleWith(ctx, "processor", cfgPath, "processor-"+tag+".log", "/healthz")
	if err != nil {
		return procsRun{}, err
	}
	defer proc.stop()
	r, err := drainTogether(ctx, p.st, []string{base}, backlog, 0)
	if err != nil {
		return procsRun{}, fmt.Errorf("%s: %w", stage, err)
	}
	r.peakRSS = proc.peakRSS()
	if r.cost, err = pgw.close(ctx, stage, p.size, backlog); err != nil {
		return procsRun{}, err
	}
	var rows int
	if err := p.st.Pool().QueryRow(ctx, `SELECT count(*) FROM bench.payments`).Scan(&rows); err != nil {
		return procsRun{}, err
	}
	if want := map[bool]int{false: 0, true: backlog}[sql]; rows != want {
		return procsRun{}, fmt.Errorf("%s: bench.payments holds %d rows, want %d", stage, rows, want)
	}
	p.log.Info("measured", "stage", stage, "pass", pass+1, "per_second", int(r.rate))
	return r, nil
}
