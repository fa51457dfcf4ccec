package store_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/pkg/store"
)

func TestConnectionBudgetShortfalls(t *testing.T) {
	b := store.ConnectionBudget{MaxConnections: 100, Reserved: 3, InUse: 40}
	tests := []struct {
		name                    string
		maxConns, own, replicas int
		want                    []string // one substring per shortfall
	}{
		{"fits", 10, 1, 2, nil},
		{"exactly what is left, own connections counted", 58, 1, 1, nil},
		{"more than is left", 60, 1, 1, []string{"postgres.max_conns (60) is more than the 58 connections left"}},
		{"replicas together too many", 30, 1, 4, []string{"processor.replicas × postgres.max_conns (4 × 30 = 120)"}},
		{"both", 100, 0, 2, []string{"left on the server", "(2 × 100 = 200)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := b.Shortfalls(tt.maxConns, tt.own, tt.replicas)
			if len(got) != len(tt.want) {
				t.Fatalf("Shortfalls = %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("shortfall %q does not say %q", got[i], w)
				}
			}
		})
	}
}

func TestReadConnectionBudget(t *testing.T) {
	t.Parallel()
	st := open(t)
	b, err := st.ReadConnectionBudget(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b.MaxConnections < 1 || b.Reserved < 0 || b.InUse < 1 || b.Left() >= b.Available() {
		t.Fatalf("budget %+v: want a limit and at least this connection in use", b)
	}

	// A role without pg_read_all_stats counts the owner's sessions too.
	ctx := context.Background()
	held, err := st.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	role := fmt.Sprintf("budget_%d", time.Now().UnixNano())
	if _, err := st.Pool().Exec(ctx, `CREATE ROLE `+role+` LOGIN PASSWORD 'budget'`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = st.Pool().Exec(context.Background(), `DROP ROLE `+role) })
	u, err := url.Parse(st.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "budget")
	plain, err := store.Open(ctx, u.String(), 1)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := plain.ReadConnectionBudget(ctx)
	plain.Close()
	if err != nil {
		t.Fatal(err)
	}
	if pb.MaxConnections != b.MaxConnections || pb.InUse < 2 {
		t.Errorf("an unprivileged role reads %+v (want the owner's connection and its own in use), the owner %+v", pb, b)
	}
	t.Logf("owner reads %+v, an unprivileged role %+v", b, pb)
}
