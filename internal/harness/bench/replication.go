package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/intakehq/intake/internal/harness/pgcluster"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/store"
)

// The replication comparison (Config.Replication, `intake bench
// --replication`): what a synchronous standby costs the processor's writes.
// A primary and a streaming standby on this host (both fsync on); the
// processor's Postgres writes — references (c), batched, and (d), one
// transaction per event — run with the standby asynchronous and
// synchronous (synchronous_standby_names, switched by ALTER SYSTEM and a
// reload) in alternating rounds, so drift on the host moves both alike.
// The ratios are synchronous/asynchronous. On one host the standby's
// round trip is a loopback one: across zones it is longer, and a batch of
// 256 events pays it once.

func runReplication(ctx context.Context, c Config, rep *Report, dir string, size int) error {
	log := c.Log.With("payload", size)
	primary, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dir, fmt.Sprintf("pg-primary-%d", size))})
	if err != nil {
		return err
	}
	defer stopCluster(ctx, primary)
	standby, err := pgcluster.StartStandby(ctx, primary, "standby", pgcluster.Options{Dir: filepath.Join(dir, fmt.Sprintf("pg-standby-%d", size))})
	if err != nil {
		return err
	}
	defer stopCluster(ctx, standby)

	db := fmt.Sprintf("bench_%d_%d", size, time.Now().UnixNano())
	if err := createDB(ctx, primary.URL("postgres"), db); err != nil {
		return err
	}
	if err := store.Migrate(ctx, primary.URL(db), nil); err != nil {
		return err
	}
	st, err := store.Open(ctx, primary.URL(db), 16)
	if err != nil {
		return err
	}
	defer st.Close()
	body := newRequests("", provider.Config{Provider: "standard", Secrets: []string{benchSecret}}, size, "repl").body("repl")

	var batched, single [2]pgRate // [0] asynchronous, [1] synchronous
	const rounds = 4
	for round := range rounds {
		sync := round%4 == 1 || round%4 == 2 // async, sync, sync, async
		names := ""
		if sync {
			names = "standby"
		}
		if _, err := st.Pool().Exec(ctx, fmt.Sprintf(`ALTER SYSTEM SET synchronous_standby_names = '%s'`, names)); err != nil {
			return err
		}
		if _, err := st.Pool().Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
			return err
		}
		want, i := "async", 0
		if sync {
			want, i = "sync", 1
		}
		if err := waitSyncState(ctx, st, want); err != nil {
			return err
		}
		if err := pgRefs(ctx, log, st, body, c.Duration/rounds, round, cpuMeter{}, &batched[i], &single[i]); err != nil {
			return err
		}
	}
	for i, mode := range []string{"asynchronous", "synchronous"} {
		rep.Figures = append(rep.Figures,
			Figure{Stage: fmt.Sprintf("Postgres batched-insert limit (c), standby %s", mode), Payload: size, Rate: batched[i].rate(),
				Note: "256 per tx, 2 in flight"},
			Figure{Stage: fmt.Sprintf("one transaction per event (d), standby %s", mode), Payload: size, Rate: single[i].rate(),
				Note: "8 in flight"})
	}
	rep.Ratios = append(rep.Ratios,
		Ratio{Name: "batched writes (c), synchronous / asynchronous standby", Payload: size, Value: batched[1].rate() / batched[0].rate()},
		Ratio{Name: "one tx per event (d), synchronous / asynchronous standby", Payload: size, Value: single[1].rate() / single[0].rate()})
	return nil
}

// waitSyncState waits until the primary reports its standby in state want
// (pg_stat_replication.sync_state: the reload has taken effect).
func waitSyncState(ctx context.Context, st *store.Store, want string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got string
		err := st.Pool().QueryRow(ctx, `SELECT coalesce(max(sync_state), '') FROM pg_stat_replication`).Scan(&got)
		if err == nil && got == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("standby sync_state %q, want %q (err: %v)", got, want, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func stopCluster(ctx context.Context, c *pgcluster.Cluster) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = c.Stop(sctx)
}
