package intake_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/stream"
)

// TestWaitingForPostgresHidesThePassword: a role whose database does not
// answer logs "waiting for postgres" and fails when its start budget ends;
// neither the log nor the error shows the password of the URL.
func TestWaitingForPostgresHidesThePassword(t *testing.T) {
	t.Parallel()
	n := testenv.NATS(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there
	cfg, err := config.Parse([]byte(`
integrations:
  - {name: demo, provider: standard, tenant: acme, secrets: ["whsec_b3duLXNlY3JldC1vZi10aGlzLXRlc3Q="]}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.URL = n.URL()
	cfg.Postgres.URL = "postgres://svc:PASSWORD-s3cret@" + addr + "/intake?sslmode=disable"
	if err := stream.Setup(context.Background(), cfg.NATS, nil); err != nil { // as intake migrate does
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	a, err := intake.New(ctx, cfg, intake.Options{Roles: intake.Roles{Replayer: true}, HTTPAddr: "127.0.0.1:0",
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	if err == nil {
		_ = a.Stop(context.Background())
		t.Fatal("the app started without its database")
	}
	if !strings.Contains(logs.String(), "waiting for postgres") {
		t.Fatalf("no waiting log:\n%s", logs.String())
	}
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(logs.String(), "s3cret") {
		t.Fatalf("the password leaked: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "svc@"+addr) {
		t.Fatalf("the log does not name the database:\n%s", logs.String())
	}
}
