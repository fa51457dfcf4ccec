package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/internal/harness/pgcluster"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/store"
)

// replicated is a primary with a table t and a streaming standby that has
// replayed it.
func replicated(t *testing.T) (*testenv.PG, *pgcluster.Cluster) {
	t.Helper()
	primary := testenv.PrivatePostgres(t)
	exec(t, primary.URL(), `CREATE TABLE t (v int)`)
	standby := primary.StartStandby(t, "standby")
	return primary, standby
}

func exec(t *testing.T, url, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// A write on a real standby fails the way a failover makes it fail, and
// that is an outage to wait out, not the data's fault. Writable tells the
// standby from the primary.
func TestAStandbyIsReadOnly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	primary, standby := replicated(t)

	conn, err := pgx.Connect(ctx, standby.URL("intake"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	_, insert := conn.Exec(ctx, `INSERT INTO t VALUES (1)`)
	create := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `CREATE TABLE u (v int)`)
		return err
	})
	for name, err := range map[string]error{"insert": insert, "create in a transaction": create,
		"wrapped": fmt.Errorf("inbox: %w", insert)} {
		if !store.ReadOnly(err) || !store.Transient(err) || store.Refused(err) || store.Unreachable(err) {
			t.Errorf("%s on a standby: %v: ReadOnly %v, Transient %v, Refused %v, Unreachable %v; want read-only, transient only",
				name, err, store.ReadOnly(err), store.Transient(err), store.Refused(err), store.Unreachable(err))
		}
	}
	if store.ReadOnly(errors.New("plain")) || store.ReadOnly(nil) {
		t.Error("ReadOnly of an error that is not the server's")
	}

	for _, c := range []struct {
		name string
		url  string
		want error
	}{{"primary", primary.URL(), nil}, {"standby", standby.URL("intake"), store.ErrReadOnly}} {
		st, err := store.Open(ctx, c.url, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Writable(ctx); !errors.Is(err, c.want) {
			t.Errorf("Writable on the %s = %v, want %v", c.name, err, c.want)
		}
		st.Close()
	}
}

// An old primary turns read-only after a failover: a write through the
// store fails as ReadOnly, the pool drops its connections, and the next
// attempt finds the promoted standby through the multi-host URL.
func TestStoreFindsThePromotedPrimary(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary, standby := replicated(t)
	st, err := store.Open(ctx, pgcluster.MultiHostURL("intake", primary.Cluster(), standby), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	insert := func() (port int, err error) {
		err = st.Pool().QueryRow(ctx, `INSERT INTO t VALUES (1) RETURNING inet_server_port()`).Scan(&port)
		return port, err
	}
	// Fill the pool: every connection is on the primary.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if port, err := insert(); err != nil || port != primary.Cluster().Port() {
				t.Errorf("insert before the failover: port %d, %v; want the primary's", port, err)
			}
		})
	}
	wg.Wait()

	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	exec(t, primary.URL(), `ALTER SYSTEM SET default_transaction_read_only = on`)
	exec(t, primary.URL(), `SELECT pg_reload_conf()`)
	testenv.Eventually(t, 30*time.Second, func() bool {
		var ro string
		conn, err := pgx.Connect(ctx, primary.URL())
		if err != nil {
			return false
		}
		defer conn.Close(context.Background())
		return conn.QueryRow(ctx, `SHOW transaction_read_only`).Scan(&ro) == nil && ro == "on"
	}, "the old primary never turned read-only")

	var readOnly int
	testenv.Eventually(t, 30*time.Second, func() bool {
		port, err := insert()
		switch {
		case store.ReadOnly(err):
			readOnly++
		case err != nil:
			t.Fatalf("insert during the failover: %v; want success or a read-only error", err)
		}
		return port == standby.Port()
	}, "the store never wrote to the promoted primary")
	// The pool left the old primary by dropping its connections: one
	// read-only error, not one per connection.
	if readOnly != 1 {
		t.Errorf("%d read-only errors before the store found the new primary, want 1", readOnly)
	}
	if err := st.Writable(ctx); err != nil {
		t.Errorf("Writable after the failover = %v", err)
	}
}
