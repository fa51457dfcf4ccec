package main

import (
	"cmp"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/processor"
)

func newPurgeCmd(g *globals) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "purge",
		Short: "Remove rows past their retention now (processors do it every retention.interval); --dry-run shows what would go",
		Long: `purge removes what the config's retention section says is past its time, as the
processors' scheduled pass does: processed and stale inbox rows and the replay guard's
records after retention.inbox (integrations[].inbox_retention for theirs), the delivery
history and executions after retention.history, conflicts, failed and quarantined inbox
rows, rejected messages and finished replays after retention.evidence; and the outbox's
daily partitions whose whole day is older than outbox.retention and holds no pending row.

It runs against Postgres (postgres.url or DATABASE_URL), in batches of
retention.batch_size rows, and waits for no other runner: when a processor's pass (or
another purge) holds the purge lease it says so and exits 1. --dry-run counts the rows
each step would remove and changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := g.loadConfig(false, config.NoSecrets)
			if err != nil {
				return err
			}
			if cfg.Postgres.URL == "" {
				return fmt.Errorf("postgres.url (or DATABASE_URL) is required")
			}
			ctx := cmd.Context()
			st, err := store.Open(ctx, cfg.Postgres.URL, 2)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := store.CheckMigrated(ctx, st); err != nil {
				return err
			}
			now := time.Now()
			out := cmd.OutOrStdout()
			// The outbox goes by whole days (each processor's relay drops
			// them every minute): its partitions past outbox.retention.
			outboxCutoff := now.Add(-cmp.Or(cfg.Outbox.Retention, config.DefaultRetention))
			outbox := func(rows []store.Purged) ([]store.Purged, error) {
				days, err := st.DropOutboxPartitions(ctx, outboxCutoff, dryRun)
				if len(days) == 0 {
					return rows, err
				}
				p := store.Purged{Table: "outbox", What: fmt.Sprintf("published, %d whole days (estimated rows)", len(days))}
				for _, d := range days {
					p.Rows += d.Rows
				}
				return append(rows, p), err
			}
			if dryRun {
				rows, err := st.PurgeCount(ctx, processor.PurgeCutoffs(cfg, now))
				if err != nil {
					return err
				}
				if rows, err = outbox(rows); err != nil {
					return err
				}
				printPurged(out, "would remove", rows)
				return nil
			}
			rows, err := processor.Purge(ctx, st, cfg, now, processor.PurgeHolder())
			if err == nil {
				rows, err = outbox(rows)
			}
			printPurged(out, "removed", rows)
			return err
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count what would be removed; change nothing")
	return cmd
}

// printPurged writes one line per purge step and a total.
func printPurged(w io.Writer, verb string, rows []store.Purged) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var total int64
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", r.Table, r.What, r.Rows)
		total += r.Rows
	}
	tw.Flush()
	fmt.Fprintf(w, "%s %d rows past retention\n", verb, total)
}
