package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/store"
)

func TestServerIdentitySame(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	primary := store.ServerIdentity{Addr: "10.0.0.1", Port: 5432, StartedAt: at}
	tests := []struct {
		name  string
		other store.ServerIdentity
		same  bool
	}{
		{"itself", primary, true},
		{"same start in another zone", store.ServerIdentity{Addr: "10.0.0.1", Port: 5432, StartedAt: at.In(time.FixedZone("x", 3600))}, true},
		{"the standby, promoted", store.ServerIdentity{Addr: "10.0.0.2", Port: 5432, StartedAt: at.Add(-time.Hour)}, false},
		{"another port", store.ServerIdentity{Addr: "10.0.0.1", Port: 5433, StartedAt: at}, false},
		{"restarted", store.ServerIdentity{Addr: "10.0.0.1", Port: 5432, StartedAt: at.Add(time.Minute)}, false},
		{"in recovery", store.ServerIdentity{Addr: "10.0.0.1", Port: 5432, StartedAt: at, InRecovery: true}, false},
	}
	for _, tt := range tests {
		if got := primary.Same(tt.other); got != tt.same {
			t.Errorf("%s: Same = %t, want %t", tt.name, got, tt.same)
		}
	}
}

// TestServerWatcherSeesARestart: a restarted server is another run of it,
// reported once it answers again; reads while it is away are skipped.
func TestServerWatcherSeesARestart(t *testing.T) {
	t.Parallel()
	pg := testenv.PrivatePostgres(t)
	ctx := context.Background()
	st, err := store.Open(ctx, pg.URL(), 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	before, err := st.ServerIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before.Addr != "127.0.0.1" || before.Port != pg.Cluster().Port() || before.StartedAt.IsZero() || before.InRecovery {
		t.Fatalf("identity %+v, want the primary on 127.0.0.1:%d", before, pg.Cluster().Port())
	}
	if again, err := st.ServerIdentity(ctx); err != nil || !again.Same(before) {
		t.Fatalf("a second read: %+v, %v; want the same server", again, err)
	}

	changes := make(chan store.ServerChange, 8)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		store.ServerWatcher{Store: st, Interval: 50 * time.Millisecond, Baseline: before,
			OnChange: func(c store.ServerChange) { changes <- c }}.Run(wctx)
	}()
	t.Cleanup(func() { cancel(); <-done })

	pg.Restart(t)
	var c store.ServerChange
	testenv.Eventually(t, 60*time.Second, func() bool {
		select {
		case c = <-changes:
			return true
		default:
			return false
		}
	}, "no change reported after a restart")
	if !c.Old.Same(before) || c.New.Same(before) || !c.New.StartedAt.After(before.StartedAt) || c.New.Port != before.Port {
		t.Fatalf("change %+v, want the same address restarted after %s", c, before.StartedAt)
	}
	select {
	case c := <-changes:
		t.Fatalf("a second change without a restart: %+v", c)
	default:
	}
}
