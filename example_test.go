package intake_test

import (
	"context"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/processor"
)

// A program with its own business logic runs the processor role with its
// handler in place of Forward: one binary, configured by the same file as
// `intake processor`. Run connects, migrates nothing (run `intake migrate`
// first), serves health and metrics on HTTPAddr, and drains in-flight work
// when ctx ends.
func ExampleRun() {
	cfg, err := config.Load(os.Getenv("INTAKE_CONFIG"))
	if err != nil {
		log.Fatal(err)
	}
	h := processor.NewRouter().On("invoice.*", processor.HandlerFunc(
		func(ctx context.Context, tx pgx.Tx, ev *processor.Event) ([]processor.Message, error) {
			_, err := tx.Exec(ctx, `UPDATE billing.invoices SET paid = true WHERE id = $1`, ev.ObjectID)
			return nil, err
		}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = intake.Run(ctx, cfg, intake.Options{
		Roles:    intake.Roles{Processor: true},
		HTTPAddr: ":9091",
		Handler:  h,
		Log:      slog.New(slog.NewJSONHandler(os.Stderr, nil)),
	})
	if err != nil {
		log.Fatal(err) // a role that failed: exit non-zero so the supervisor restarts it
	}
}
