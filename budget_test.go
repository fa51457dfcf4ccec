package intake_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
)

// TestAPoolLargerThanThePostgresBudgetIsWarned: a processor whose pool (or
// its replicas' pools together) could outgrow max_connections says so at
// start, naming the keys, and starts anyway.
func TestAPoolLargerThanThePostgresBudgetIsWarned(t *testing.T) {
	t.Parallel()
	cfg, _ := lifecycleConfig(t)
	cfg.Postgres.MaxConns, cfg.Processor.Replicas = 100_000, 3
	var logs testenv.Buffer
	a, err := intake.New(context.Background(), cfg, intake.Options{Roles: intake.Roles{Processor: true}, HTTPAddr: "127.0.0.1:0",
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := logs.String()
	for _, want := range []string{"postgres.max_conns (100000) is more than the", "processor.replicas × postgres.max_conns (3 × 100000 = 300000)"} {
		if !strings.Contains(l, want) {
			t.Errorf("the log does not say %q:\n%s", want, l)
		}
	}

	// The defaults fit a stock server: no warning.
	cfg, _ = lifecycleConfig(t)
	var quiet testenv.Buffer
	a, err = intake.New(context.Background(), cfg, intake.Options{Roles: intake.Roles{Processor: true}, HTTPAddr: "127.0.0.1:0",
		Log: slog.New(slog.NewTextHandler(&quiet, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(quiet.String(), "connection budget") {
		t.Errorf("the defaults were warned about:\n%s", quiet.String())
	}
}
