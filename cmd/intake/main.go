// Command intake is the one Intake binary: every role and the operator tools
// are subcommands, and the work lives in the packages. A role's command
// parses flags, loads the configuration and runs the service through package
// intake (the module root). The operator commands (replay, redeliver,
// reconcile, events, conflicts) call the replayer's API through
// replayer/apiclient; printing its answers, as tables or JSON, is this
// package's own work (operator.go and each command's file). dev, nats and
// bench start harness code (internal/harness).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	g := &globals{}
	if err := newRootWith(g).ExecuteContext(ctx); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		g.fatal(err)
		os.Exit(1)
	}
}

// fatal reports the error that ends the command: a JSON line (level
// ERROR, msg "intake: exiting", the error) under --log-format json, so that
// a log pipeline sees why a pod stopped; otherwise "intake: <error>".
func (g *globals) fatal(err error) {
	if g.logFormat == "json" {
		g.logger().Error("intake: exiting", "err", err.Error()) // err, as on every other line
		return
	}
	fmt.Fprintln(os.Stderr, "intake:", err)
}

// exitError carries a specific exit code (e.g. `intake send` got a non-2xx).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

type globals struct {
	configPath string
	logFormat  string
	logLevel   string
	command    string // the subcommand run: the "role" of JSON log lines
}

func newRoot() *cobra.Command { return newRootWith(&globals{}) }

func newRootWith(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "intake",
		Short:         "Intake receives webhooks and turns at-least-once delivery into exactly-once business effect",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			g.command = strings.TrimPrefix(cmd.CommandPath(), "intake ")
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.configPath, "config", "", "config file (default: $INTAKE_CONFIG, else, for dev and send, the built-in example (pkg/config/example.yaml))")
	pf.StringVar(&g.logFormat, "log-format", "text", "log format: text or json")
	pf.StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.AddCommand(
		newDevCmd(g),
		newIngressCmd(g),
		newProcessorCmd(g),
		newReplayerCmd(g),
		newDispatcherCmd(g),
		newMigrateCmd(g),
		newPurgeCmd(g),
		newSendCmd(g),
		newReplayCmd(),
		newRedeliverCmd(),
		newReconcileCmd(),
		newEventsCmd(),
		newConflictsCmd(),
		newStatusCmd(),
		newFailuresCmd(),
		newDestinationsCmd(),
		newLoginCmd(),
		newLogoutCmd(),
		newBenchCmd(g),
		newVersionCmd(),
		newNATSCmd(),
		newHealthcheckCmd(g),
		newSubscriberCmd(),
	)
	return root
}
