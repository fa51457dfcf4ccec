package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/pgcluster"
)

// StartStandby starts a streaming standby of p named name
// (pgcluster.StartStandby: a clone of everything p holds now, the database
// "intake" included, replaying what p writes later) and stops it when the
// test ends. Promote it to fail over; URL("intake") reaches its copy of the
// database.
func (p *PG) StartStandby(t testing.TB, name string) *pgcluster.Cluster {
	t.Helper()
	dir := clusterDir(t, "intake-pg-standby-")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := pgcluster.StartStandby(ctx, p.cluster, name, pgcluster.Options{Dir: dir, Fast: true})
	if err != nil {
		t.Fatalf("testenv: standby %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("testenv: standby %s: %v", name, err)
		}
	})
	return c
}
