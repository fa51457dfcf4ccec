package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/faults"
	"github.com/intakehq/intake/internal/harness/chaos"
	"github.com/intakehq/intake/pkg/config"
)

// newChaosCmd is `intake bench chaos`: the chaos and soak harness (internal/harness/chaos).
func newChaosCmd() *cobra.Command {
	var o chaos.Options
	var quiet bool
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Crash, restart and duplicate everything; prove zero duplicate effects and zero lost events",
		Long: `chaos starts the real pieces as separate processes on loopback — NATS (one node, or a
3-node cluster with R3 streams), a private Postgres, 2+ ingress and 2+ processor
processes of this binary — and sends N signed events, each delivered 2-3 times in
parallel to different ingresses (some again after the JetStream duplicate window,
some with another payload under the same id, some as out-of-order object versions).
Like a provider it retries every answer that is not a 2xx, and it drops some
responses on purpose. Meanwhile it kills processors with SIGKILL (half of them right
between a commit and its acks), kills and restarts NATS (in a cluster: the INTAKE_IN
stream leader) and stops and starts Postgres.

With --failover Postgres is a primary and a streaming standby (synchronous, or
asynchronous with --async) that every process reaches through one multi-host URL,
and the Postgres fault is a failover: the standby is cut off for 2s (its WAL stream
ends), the primary is killed with SIGKILL, the standby is promoted; later the old
primary rejoins as a standby of the new one (pg_rewind). An intake replayer runs as
well, for the re-drive of events whose acknowledged commit was lost with the primary.

The verdict comes from independent evidence: the business table the processors'
domain handler writes (one row per applied event), the client's own record of which
events got a 2xx, intake.conflicts and the inbox's stale rows, and the messages on
INTAKE_OUT. It prints one closing line and exits 1 on any violation. Needs the
PostgreSQL server binaries (initdb, postgres; with --failover also pg_basebackup and
pg_rewind) on PATH or in /usr/lib/postgresql/*/bin.

With --partition the faults are hanging partitions instead: the processors reach
Postgres and the ingresses NATS through fault proxies, which blackhole them (flows
accepted and kept open, nothing forwarded) for 45s and 30s, one after the other,
under load (--rate defaults to 50/s there, so the load outlasts both). The verdict
adds: every partitioned role's /readyz turned 503 during its partition and 200 again
by itself within 30s of the heal, and no webhook waited more than 10s for its answer. With
--control the processors' Postgres URL turns Intake's bounds off (connect_timeout=0,
no idle_in_transaction_session_timeout), and the run must FAIL.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Binary == "" {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("find this binary: %w (pass --binary)", err)
				}
				o.Binary = exe
			}
			if !quiet {
				o.Log = cmd.ErrOrStderr()
			}
			if o.Partition && !cmd.Flags().Changed("rate") {
				o.Rate = partitionRate
			}
			res, err := chaos.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprint(out, res.Summary())
			fmt.Fprintln(out, res.Line())
			if !res.OK() {
				return exitError{code: 1}
			}
			return nil
		},
	}
	// The flags show the harness's own defaults (chaos.Options.WithDefaults).
	d := chaos.Options{}.WithDefaults()
	f := cmd.Flags()
	f.IntVar(&o.Events, "events", d.Events, "distinct logical events")
	f.Float64Var(&o.Rate, "rate", d.Rate, "events started per second (faults are spread over the load by progress)")
	f.IntVar(&o.Ingress, "ingress", d.Ingress, "ingress processes (at least 2)")
	f.IntVar(&o.Processors, "processors", d.Processors, "processor processes (at least 2)")
	f.BoolVar(&o.Cluster, "cluster", false, "3-node NATS cluster with R3 streams; the INTAKE_IN stream leader is killed mid-run")
	f.IntVar(&o.ProcessorKills, "kills", d.ProcessorKills, "processor kills (kill -9; half between a commit and its acks); -1 for none")
	f.BoolVar(&o.NoNATSFault, "no-nats-fault", false, "skip the NATS kill and restart")
	f.BoolVar(&o.NoPostgresFault, "no-postgres-fault", false, "skip the Postgres fault (stop and start, or with --failover the failover and rejoin)")
	f.BoolVar(&o.Failover, "failover", false, "Postgres primary and streaming standby; the fault is a failover (standby cut off, primary kill -9, standby promoted, old primary rejoins); runs a replayer for the re-drive")
	f.BoolVar(&o.NoCut, "no-cut", false, "with --failover (synchronous): kill the primary with the standby still connected, so commits land on the standby while their clients see the connection drop (the inbox must resolve them)")
	f.BoolVar(&o.Async, "async", false, "with --failover: asynchronous replication (acknowledged commits can be lost with the primary; the re-drive must bring them back)")
	f.DurationVar(&o.DuplicateWindow, "duplicate-window", d.DuplicateWindow, "JetStream duplicate window (short, so late deliveries reach the inbox)")
	f.DurationVar(&o.AckWait, "ack-wait", d.AckWait, "processor ack deadline (how soon a killed processor's messages come back)")
	f.Float64Var(&o.TripleShare, "triple-share", d.TripleShare, "share of events delivered 3 times instead of 2")
	f.Float64Var(&o.LateShare, "late-share", d.LateShare, "share of events delivered once more after the duplicate window")
	f.Float64Var(&o.ConflictShare, "conflict-share", d.ConflictShare, "share of events followed by another payload under the same id")
	f.Float64Var(&o.OrderShare, "order-share", d.OrderShare, "share of events that are object versions sent out of order")
	f.Float64Var(&o.LostShare, "lost-share", d.LostShare, "share of HTTP attempts whose response the client drops")
	f.Uint64Var(&o.Seed, "seed", 0, "seed for the event mix and fault moments (default: the clock)")
	f.StringVar(&o.Dir, "dir", "", "run directory (default: a temp dir, removed after a passing run)")
	f.BoolVar(&o.Keep, "keep", false, "keep the run directory after a passing run")
	f.StringVar(&o.Binary, "binary", "", "intake binary for the child processes (default: this one)")
	f.StringVar(&o.NATSConfig, "nats-config", "", "nats-server configuration of the run's nodes: users, permissions (default: deploy/nats/intake.conf above the working directory)")
	f.DurationVar(&o.Timeout, "timeout", d.Timeout, "bound on the whole run")
	f.StringVar(&o.Handler, "handler", d.Handler, "what writes the business row: go (the harness's Go handler) or sql (a SQL handler in the run's config, loaded by the stock processor)")
	f.BoolVar(&o.Partition, "partition", false, "hanging partitions instead of kills and restarts: processors ↔ Postgres, then ingress ↔ NATS, blackholed through fault proxies (flows open and silent); with --control, its negative control")
	f.DurationVar(&o.PartitionPostgres, "partition-postgres", d.PartitionPostgres, "with --partition: how long processors ↔ Postgres is blackholed")
	f.DurationVar(&o.PartitionNATS, "partition-nats", d.PartitionNATS, "with --partition: how long ingress ↔ NATS is blackholed")
	f.BoolVar(&o.Control, "control", false, "negative control: processors write the business row outside the inbox transaction; the run must FAIL (exit 1)")
	f.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	return cmd
}

// partitionRate is --rate's default with --partition: slow enough that the
// load of the default --events outlasts both partitions.
const partitionRate = 50

// newChaosProcessorCmd is the processor the chaos harness starts: `intake
// processor` with the harness's domain handler (one business row per applied
// event) and its crash switch (on chaos.CrashSignal, die between the next
// commit and its acks). Hidden: a harness role, not a production one.
func newChaosProcessorCmd(g *globals) *cobra.Command {
	var (
		addr    string
		handler string
	)
	cmd := &cobra.Command{
		Use:    chaos.ProcessorCommand,
		Short:  "The chaos harness's processor: intake processor with a business-row handler and a crash switch",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			roles := intake.Roles{Processor: true}
			cfg, _, err := g.loadConfig(false, roles.Secrets()) // what intake processor loads: the envelope keys
			if err != nil {
				return err
			}
			o := intake.Options{Roles: roles, HTTPAddr: addr, Log: g.logger()}
			switch handler {
			case "effects":
				o.Handler = chaos.Effects()
			case "none": // the config's handlers: write the row (chaos.EffectsSQL)
				if len(cfg.Handlers) == 0 {
					return fmt.Errorf("--handler none: the config lists no handlers")
				}
			case "effects-outside-tx": // the negative control
				h, closeDB, err := chaos.EffectsOutsideTx(cmd.Context(), cfg.Postgres.URL)
				if err != nil {
					return err
				}
				defer closeDB()
				o.Handler = h
			default:
				return fmt.Errorf("--handler: unknown %q (effects, effects-outside-tx or none)", handler)
			}
			ctx := faults.With(cmd.Context(), faults.Hooks{AfterCommit: chaos.CrashAfterCommitOnSignal(cmd.Context())})
			setGCPercent(processorGCPercent)
			return intake.Run(ctx, cfg, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "http-addr", config.DefaultProcessorHTTPAddr, "listen address for /metrics, /healthz, /readyz")
	f.StringVar(&handler, "handler", "effects", "effects: one row per applied event in chaos.effects, in the inbox transaction; effects-outside-tx: its negative control; none: the config's SQL handlers only")
	return cmd
}
