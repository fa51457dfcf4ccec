package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/internal/harness/pgcluster"
	"github.com/intakehq/intake/pkg/store"
)

// The big-tables stage (Config.Prefill, `intake bench --prefill
// 10000000`): does the processor slow down as its tables grow? One
// processor drains the same backlog into an empty database and into one
// pre-filled with Prefill events' rows — inbox (processed), delivery
// history and executions, spread evenly over the 90 days before now in
// the order they would have arrived, with random event ids, as a deployment
// at its default retention holds them — in the order empty, full, full,
// empty, so drift on the host moves both alike. Then the purge removes the
// oldest tenth of the pre-filled events, as a pass does (store.Purge,
// batches of config.DefaultPurgeBatchSize), and its rate in events per
// second stands beside the processor's.

// prefillChunk is the events one INSERT … SELECT generates: progress in the
// log, and transactions that do not grow past a few hundred megabytes.
const prefillChunk = 500_000

// prefillSpan is how far back the pre-filled rows reach: the inbox's
// default retention.
const prefillSpan = 90 * 24 * time.Hour

func runPrefill(ctx context.Context, c Config, rep *Report, dir string, pg *pgcluster.Cluster, size int) error {
	log := c.Log.With("payload", size, "prefill", c.Prefill)
	backlog := max(int(procGuessRate*c.Duration.Seconds()), 1000)

	full, dropFull, err := freshDB(ctx, pg, fmt.Sprintf("bench_full_%d_%d", size, time.Now().UnixNano()))
	if err != nil {
		return err
	}
	defer dropFull()
	start := time.Now()
	if err := prefill(ctx, full, c.Prefill, start, log.Info); err != nil {
		return err
	}
	log.Info("prefilled", "took", time.Since(start).Round(time.Second))

	// The first drain sizes the backlog for the rest. Every empty drain
	// gets a database of its own (drainWith); the full one keeps the
	// backlogs it drained (two, next to Prefill events).
	r, err := drainWith(ctx, c, dir, pg, size, 1, backlog)
	if err != nil {
		return err
	}
	backlog = max(int(r.rate*c.Duration.Seconds()), 1000)
	var rates [2][]procsRun // empty, full
	for _, which := range []int{0, 1, 1, 0} {
		var r procsRun
		var err error
		if which == 0 {
			r, err = drainWith(ctx, c, dir, pg, size, 1, backlog)
		} else {
			r, err = drainOn(ctx, c, dir, pg, full, size, 1, backlog)
		}
		if err != nil {
			return err
		}
		rates[which] = append(rates[which], r)
		log.Info("measured", "tables", []string{"empty", "pre-filled"}[which], "per_second", int(r.rate))
	}
	rate := func(rs []procsRun) float64 {
		var events, secs float64
		for _, r := range rs {
			events, secs = events+r.rate*r.secs, secs+r.secs
		}
		return events / secs
	}
	emptyRate, fullRate := rate(rates[0]), rate(rates[1])
	rep.Figures = append(rep.Figures,
		Figure{Stage: "intake processor, empty tables", Payload: size, Rate: emptyRate,
			Note: fmt.Sprintf("backlog %d, 2 drains (1st and 4th)", backlog)},
		Figure{Stage: fmt.Sprintf("intake processor, %d events' rows already in place", c.Prefill), Payload: size, Rate: fullRate,
			Note: fmt.Sprintf("backlog %d, 2 drains (2nd and 3rd); inbox, history, executions over 90 days", backlog)})
	rep.Ratios = append(rep.Ratios, Ratio{Name: "processor, pre-filled / empty tables", Payload: size, Value: fullRate / emptyRate})

	// The purge: the oldest tenth of the pre-filled events.
	st, err := store.Open(ctx, full, 4)
	if err != nil {
		return err
	}
	defer st.Close()
	cutoff := start.Add(-prefillSpan * 9 / 10)
	pstart := time.Now()
	purged, err := st.Purge(ctx, store.Cutoffs{Inbox: cutoff, History: cutoff, Evidence: cutoff}, 500, nil)
	if err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	secs := time.Since(pstart).Seconds()
	var inbox, rows int64
	var steps []string
	for _, p := range purged {
		rows += p.Rows
		if p.Table == "inbox" {
			inbox += p.Rows
		}
		steps = append(steps, fmt.Sprintf("%s %.0f/s", p.Table, float64(p.Rows)/p.Took.Seconds()))
	}
	if inbox == 0 {
		return fmt.Errorf("purge removed no inbox row older than %s", cutoff)
	}
	purgeRate := float64(inbox) / secs
	rep.Figures = append(rep.Figures, Figure{Stage: "purge, events past retention", Payload: size, Rate: purgeRate,
		Note: fmt.Sprintf("%d events (%d rows) in %.1fs, batches of 500: %s", inbox, rows, secs, strings.Join(steps, ", "))})
	rep.Ratios = append(rep.Ratios, Ratio{Name: "purge / processor on pre-filled tables (events/s)", Payload: size, Value: purgeRate / fullRate})
	return nil
}

// prefill writes events events' rows — a processed inbox row, a delivery
// history row and an execution each — into the database at url, their
// times spread evenly over the prefillSpan before now in arrival order,
// then vacuums and analyzes the tables, as autovacuum would have over 90
// days.
func prefill(ctx context.Context, url string, events int, now time.Time, progress func(string, ...any)) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	from := now.Add(-prefillSpan)
	step := prefillSpan / time.Duration(max(events, 1))
	for lo := 1; lo <= events; lo += prefillChunk {
		hi := min(lo+prefillChunk-1, events)
		// Event ids are random (md5), as providers' are: the inbox's key
		// index takes them where they fall, not at its right edge.
		for _, q := range []string{`
			INSERT INTO intake.inbox (integration, account, event_id, tenant, event_type, payload_sha256, status,
				first_received_at, last_received_at, processed_at, stream_seq)
			SELECT 'bench', 'a', 'pre_' || md5(g::text), 'bench', 'bench.event', md5(g::text) || md5((-g)::text), 'processed',
				$3::timestamptz + g * $4::interval, $3::timestamptz + g * $4::interval, $3::timestamptz + g * $4::interval, g
			FROM generate_series($1::bigint, $2::bigint) AS g`, `
			INSERT INTO intake.deliveries (receipt_id, integration, account, event_id, received_at, instance, status_code, answer)
			SELECT 'pre:' || g, 'bench', 'a', 'pre_' || md5(g::text), $3::timestamptz + g * $4::interval, 'bench', 202, 'accepted'
			FROM generate_series($1::bigint, $2::bigint) AS g`, `
			INSERT INTO intake.executions (integration, account, event_id, mode, stream_seq, executed_at)
			SELECT 'bench', 'a', 'pre_' || md5(g::text), 'original', g, $3::timestamptz + g * $4::interval
			FROM generate_series($1::bigint, $2::bigint) AS g`} {
			if _, err := conn.Exec(ctx, q, lo, hi, from, step); err != nil {
				return fmt.Errorf("prefill: %w", err)
			}
		}
		progress("prefilling", "events", hi, "of", events)
	}
	if _, err := conn.Exec(ctx, `VACUUM (ANALYZE) intake.inbox, intake.deliveries, intake.executions`); err != nil {
		return fmt.Errorf("prefill: vacuum: %w", err)
	}
	return nil
}
