package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/internal/harness/bench"
	"github.com/intakehq/intake/pkg/config"
)

// attachPerf makes `intake bench` (no subcommand) the performance harness
// and adds the hidden reference processes it starts: `bench bare-http`
// (a), `bench bare-publish` (f) and `bench bare-client` (the dispatcher
// stage's limit).
func attachPerf(cmd *cobra.Command, g *globals) {
	var (
		c      bench.Config
		output string
	)
	cmd.Long = `bench measures ingress, processor and end to end against limits measured in the
same run (bare HTTP, raw JetStream publish, the Postgres batched-insert limit, one
transaction per event; bare HTTP answering after a PubAck and the processor's parts in one
loop, each role's work with none of Intake's code) and prints figures and ratios, and Postgres's cost per event
(WAL, CPU, rows, index entries, bytes) while the processor drains. --quick finishes in
under a minute. --durability, --replication, --processors, --prefill, --system and --dispatch each run one comparison instead
(--system: the whole pipeline as intake dev deploys it, CPU per event, issue 35; --dispatch: intake dispatcher
against a bare HTTP client posting to the same receiver, CPU per delivery, then a destination held down
for --outage and restored, then the dispatcher killed with SIGKILL --dispatch-kills times: every message
delivered, duplicates only under the same webhook-id, issue 32).
Subcommands run other harnesses.`
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c.Log = g.logger()
		rep, err := bench.Run(cmd.Context(), c)
		if rep != nil {
			if perr := rep.Print(cmd.OutOrStdout(), output == "json"); perr != nil && err == nil {
				err = perr
			}
		}
		return err
	}
	f := cmd.Flags()
	f.BoolVar(&c.Quick, "quick", false, "1 KiB payloads, 3s per stage: under a minute")
	f.DurationVar(&c.Duration, "duration", 0, "time per measurement (default 10s, 3s with --quick)")
	f.IntVar(&c.Connections, "connections", 64, "load generator connections")
	f.IntSliceVar(&c.Payloads, "payload", nil, "payload sizes in bytes (default 1024,16384; 1024 with --quick)")
	f.StringVarP(&output, "output", "o", "table", "table or json")
	f.BoolVar(&c.Durability, "durability", false, "only compare JetStream's per-write sync with its default, for ingress and raw publish")
	f.BoolVar(&c.Replication, "replication", false, "only compare the processor's Postgres writes with a synchronous and an asynchronous standby")
	f.IntSliceVar(&c.Processors, "processors", nil, "only drain the same backlog with each of these numbers of processor processes (e.g. 1,2,4): committed rate, shares, Postgres per event")
	f.IntVar(&c.Prefill, "prefill", 0, "only compare one processor on empty tables with one on tables already holding this many events' rows (e.g. 10000000, spread over 90 days), and the purge's rate")
	f.BoolVar(&c.System, "system", false, "only measure the whole pipeline as `intake dev` deploys it (default 20s of load): CPU per event of the system under test (postgres included, the generator not), against bare HTTP")
	f.BoolVar(&c.Dispatch, "dispatch", false, "only measure intake dispatcher: throughput and CPU per delivery against a bare HTTP client to the same receiver, then --outage and --dispatch-kills")
	f.IntVar(&c.DispatchInFlight, "max-in-flight", config.DefaultDestinationMaxInFlight, "with --dispatch: the destinations' max_in_flight, and the bare client's concurrency")
	f.DurationVar(&c.Outage, "outage", 0, fmt.Sprintf("with --dispatch: how long the destination is down (default %s; %s with --quick, whose retry schedule and breaker probe are the defaults / 60); negative skips it", bench.DefaultOutage, bench.DefaultQuickOutage))
	f.IntVar(&c.DispatchKills, "dispatch-kills", 0, fmt.Sprintf("with --dispatch: SIGKILLs of the dispatcher while it drains (default %d; 1 with --quick); negative skips them", bench.DefaultDispatchKills))
	f.Float64Var(&c.DispatchRate, "dispatch-rate", bench.DefaultDispatchRate, "with --dispatch: messages a second published during the outage and the kills")
	f.StringVar(&c.ProfileDir, "profile-dir", "", "write CPU profiles of ingress, processor and dispatcher here (go tool pprof)")

	var addr string
	bare := &cobra.Command{
		Use:    "bare-http",
		Short:  "Reference server for `intake bench`: reads the body, answers 200",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.ServeBare(cmd.Context(), addr)
		},
	}
	bare.Flags().StringVar(&addr, "addr", "127.0.0.1:0", "listen address")
	cmd.AddCommand(bare)

	var natsURL, subject string
	barePub := &cobra.Command{
		Use:    "bare-publish",
		Short:  "Reference server (f) for `intake bench`: reads the body, publishes it to JetStream, answers 200 after the PubAck",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			setGCPercent(ingressGCPercent) // the collector's target of the role it is the limit of
			return bench.ServeBarePublish(cmd.Context(), addr, natsURL, subject)
		},
	}
	barePub.Flags().StringVar(&addr, "addr", "127.0.0.1:0", "listen address")
	barePub.Flags().StringVar(&natsURL, "nats", "", "NATS URL")
	barePub.Flags().StringVar(&subject, "subject", "", "the subject to publish to (a stream's)")
	cmd.AddCommand(barePub)

	var bc bench.BareClientConfig
	client := &cobra.Command{
		Use:    "bare-client",
		Short:  "Reference client for `intake bench --dispatch`: posts bodies to a receiver from a process of its own",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			setGCPercent(dispatcherGCPercent) // the collector's target of the process it is the limit of
			return bench.RunBareClient(cmd.Context(), bc, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	cf := client.Flags()
	cf.StringVar(&bc.URL, "url", "", "the receiver's URL")
	cf.IntVar(&bc.Size, "payload", 1024, "body bytes")
	cf.IntVar(&bc.Connections, "connections", config.DefaultDestinationMaxInFlight, "requests in flight")
	cf.DurationVar(&bc.Duration, "duration", 5*time.Second, "how long to post")
	cf.StringVar(&bc.Prefix, "prefix", "bare", "the bodies' ids' prefix")
	cmd.AddCommand(client)
}
