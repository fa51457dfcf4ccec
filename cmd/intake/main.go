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
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "intake:", err)
		os.Exit(1)
	}
}

// exitError carries a specific exit code (e.g. `intake send` got a non-2xx).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

type globals struct {
	configPath string
	logFormat  string
	logLevel   string
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "intake",
		Short:         "Intake receives webhooks and turns at-least-once delivery into exactly-once business effect",
		SilenceUsage:  true,
		SilenceErrors: true,
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
		newMigrateCmd(g),
		newPurgeCmd(g),
		newSendCmd(g),
		newReplayCmd(),
		newRedeliverCmd(),
		newReconcileCmd(),
		newEventsCmd(),
		newConflictsCmd(),
		newBenchCmd(g),
		newVersionCmd(),
		newNATSCmd(),
		newHealthcheckCmd(g),
		newSubscriberCmd(),
	)
	return root
}
