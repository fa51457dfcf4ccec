package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/internal/harness/testenv"
)

// TestPurgeDryRunThenPurge: `intake purge --dry-run` counts the rows past
// retention and changes nothing; `intake purge` removes them; a config whose
// inbox retention is shorter than the stream keeps is refused by name.
func TestPurgeDryRunThenPurge(t *testing.T) {
	t.Parallel()
	dbURL := testenv.Postgres(t)
	path := filepath.Join(t.TempDir(), "intake.yaml")
	if err := os.WriteFile(path, []byte(`
integrations:
  - {name: demo, provider: standard, tenant: acme, account: main, secrets: ["whsec_b3duLXNlY3JldC1vZi10aGlzLXRlc3Q="]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	db := "DATABASE_URL=" + dbURL
	if out, code := runIntake(t, []string{db}, "migrate", "--config", path, "--no-streams"); code != 0 {
		t.Fatalf("migrate: exit %d\n%s", code, out)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO intake.inbox (integration, account, event_id, tenant, event_type, payload_sha256,
		status, first_received_at, last_received_at, stream_seq)
		SELECT 'demo', 'main', 'e' || g, 'acme', 'x', 'h', 'processed', $1, $1, g FROM generate_series(1, 7) AS g`,
		time.Now().Add(-100*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO intake.deliveries (receipt_id, integration, account, event_id, received_at,
		instance, status_code, answer)
		SELECT 'in:' || g, 'demo', 'main', 'e' || g, $1, 'i', 202, 'accepted' FROM generate_series(1, 7) AS g`,
		time.Now().Add(-100*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	count := func() (n int) {
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM intake.inbox`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	out, code := runIntake(t, []string{db}, "purge", "--config", path, "--dry-run")
	if code != 0 || !strings.Contains(out, "inbox") || !strings.Contains(out, "would remove 14 rows past retention") || count() != 7 {
		t.Fatalf("purge --dry-run: exit %d, %d rows left\n%s", code, count(), out)
	}
	out, code = runIntake(t, []string{db}, "purge", "--config", path)
	if code != 0 || !strings.Contains(out, "removed 14 rows past retention") || count() != 0 {
		t.Fatalf("purge: exit %d, %d rows left\n%s", code, count(), out)
	}

	short := filepath.Join(t.TempDir(), "short.yaml")
	if err := os.WriteFile(short, []byte("retention: {inbox: 240h}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := runIntake(t, []string{db}, "purge", "--config", short, "--dry-run"); code == 0 ||
		!strings.Contains(out, "retention.inbox: must be at least nats.stream.max_age") {
		t.Fatalf("a 10-day inbox under a 30-day stream: exit %d\n%s", code, out)
	}
}
