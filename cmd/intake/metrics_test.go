package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/scrape"
	"github.com/intakehq/intake/internal/harness/testenv"
)

// TestRoleCommandsExportOnlyTheirSeries runs `intake ingress`, `intake
// processor` and `intake replayer` and scrapes each one's /metrics: no
// series of another role (an ingress pod exporting the processor's last
// commit as 0 would trip the stall alert).
func TestRoleCommandsExportOnlyTheirSeries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n, dbURL, path, _, _ := roleDeps(t)

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
