package testenv

import (
	"context"
	"errors"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/pgcluster"
)

// PgBouncer is a pgbouncer in front of the test binary's Postgres (see
// Postgres), private to one test.
type PgBouncer struct {
	b *pgcluster.Bouncer
}

// StartPgBouncer starts Debian's pgbouncer in front of the shared server
// in poolMode ("transaction", "session") and stops it when the test ends.
// Without the binary the test is skipped, except in CI (CI=true), where
// .ci/run installs it and a missing one fails the test.
func StartPgBouncer(t testing.TB, poolMode string) *PgBouncer {
	t.Helper()
	admin := sharedAdminURL(t)
	dir := clusterDir(t, "intake-pgbouncer-")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := pgcluster.StartBouncer(ctx, pgcluster.BouncerOptions{Dir: dir, Upstream: admin, PoolMode: poolMode})
	if errors.Is(err, pgcluster.ErrNoPgBouncer) && os.Getenv("CI") != "true" {
		t.Skipf("testenv: %v: the tests behind a pooler are skipped (`make pgbouncer` or .ci/run installs it; under CI=true a missing one fails)", err)
	}
	if err != nil {
		t.Fatalf("testenv: pgbouncer: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Errorf("testenv: %v", err)
		}
		if t.Failed() {
			t.Logf("testenv: pgbouncer log:\n%s", b.Log())
		}
	})
	return &PgBouncer{b: b}
}

// Via is dbURL (a database of Postgres or PostgresFrom, its query
// parameters kept) reached through the pooler.
func (p *PgBouncer) Via(t testing.TB, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("testenv: pgbouncer: database url: %v", err)
	}
	via, _ := url.Parse(p.b.URL(u.Path[1:]))
	q := via.Query()
	for k, v := range u.Query() {
		q[k] = v
	}
	via.RawQuery = q.Encode()
	return via.String()
}

// Log is the end of pgbouncer's log.
func (p *PgBouncer) Log() string { return p.b.Log() }
