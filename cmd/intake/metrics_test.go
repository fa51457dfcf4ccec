package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/scrape"
	"github.com/intakehq/intake/internal/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
)

// TestRoleCommandsExportOnlyTheirSeries runs `intake ingress`, `intake
// processor` and `intake replayer` and scrapes each one's /metrics: no
// series of another role (an ingress pod exporting the processor's last
// commit as 0 would trip the stall alert).
func TestRoleCommandsExportOnlyTheirSeries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := testenv.NATS(t)
	dbURL := testenv.Postgres(t)
	if err := store.Migrate(ctx, dbURL, nil); err != nil {
		t.Fatal(err)
	}
	const yaml = `
integrations:
  - {name: demo, provider: standard, tenant: acme, account: main, secrets: ["whsec_b3duLXNlY3JldC1vZi10aGlzLXRlc3Q="]}
`
	path := filepath.Join(t.TempDir(), "intake.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := stream.Ensure(ctx, js, cfg.NATS.Stream); err != nil {
		t.Fatal(err)
	}

	// foreign are the prefixes of the other roles' series.
	foreign := map[string][]string{
		"ingress":   {"intake_processor_", "intake_outbox_", "intake_replayer_", "intake_replays", "intake_inbox_", "intake_postgres_", "intake_redrive", "intake_api_"},
		"processor": {"intake_ingress_", "intake_replayer_", "intake_replays", "intake_inbox_", "intake_redrive", "intake_api_", "intake_stream_"},
		"replayer":  {"intake_ingress_", "intake_processor_", "intake_outbox_"},
	}
	own := map[string]string{"ingress": "intake_ingress_received_total", "processor": "intake_processor_last_commit_timestamp_seconds",
		"replayer": "intake_replayer_running"}
	for _, role := range []string{"ingress", "processor", "replayer"} {
		t.Run(role, func(t *testing.T) {
			t.Parallel()
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t)))
			runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(runCtx, os.Args[0], "-test.run=^TestIntakeMain$", "--",
				role, "--config", path, "--http-addr", addr, "--log-format", "text")
			cmd.Env = append(os.Environ(), runMainEnv+"=1", "INTAKE_NATS_URL="+n.URL(), "DATABASE_URL="+dbURL)
			cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
			out := &testenv.Buffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() {
				cancel()
				<-done
				if t.Failed() {
					t.Logf("intake %s:\n%s", role, out)
				}
			})
			var names []string
			testenv.Eventually(t, time.Minute, func() bool {
				fams, err := scrape.Families(runCtx, "http://"+addr+"/metrics")
				if err != nil {
					return false
				}
				names = names[:0]
				for name := range fams {
					names = append(names, name)
				}
				_, ok := fams[own[role]]
				return ok
			}, fmt.Sprintf("intake %s exported no %s", role, own[role]))
			for _, name := range names {
				for _, p := range foreign[role] {
					if strings.HasPrefix(name, p) {
						t.Errorf("intake %s exports %s, another role's series", role, name)
					}
				}
			}
		})
	}
}
