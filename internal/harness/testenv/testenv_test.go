package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/harness/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestPostgresGivesEachTestItsOwnDatabase(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		urls = map[string]string{} // database name -> URL
	)
	t.Run("group", func(t *testing.T) {
		for _, name := range []string{"a", "b"} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				url := testenv.Postgres(t)
				conn := connect(t, url)
				ctx := context.Background()
				// The same table name in both: fails if they share a database.
				if _, err := conn.Exec(ctx, "CREATE TABLE mine (v int)"); err != nil {
					t.Fatal(err)
				}
				var db string
				if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				urls[db] = url
				mu.Unlock()
			})
		}
	})
	if len(urls) != 2 {
		t.Fatalf("databases = %v, want two distinct ones", urls)
	}
	// Both subtests have ended, so their databases are gone.
	for db, url := range urls {
		_, err := pgx.Connect(context.Background(), url)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
			t.Errorf("database %s after its test ended: err = %v, want it dropped", db, err)
		}
	}
}

func TestPrivatePostgresRestartKeepsData(t *testing.T) {
	t.Parallel()
	pg := testenv.PrivatePostgres(t)
	ctx := context.Background()
	conn := connect(t, pg.URL())
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}

	pg.Restart(t)
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("a connection survived the restart; the restart did not happen")
	}
	assertRows(t, pg.URL(), 1)

	pg.Kill(t)
	pg.Start(t)
	assertRows(t, pg.URL(), 1)
}

func assertRows(t *testing.T, url string, want int) {
	t.Helper()
	var n int
	if err := connect(t, url).QueryRow(context.Background(), "SELECT count(*) FROM kept").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Fatalf("rows = %d, want %d", n, want)
	}
}

func TestNATSRestartKeepsStreamAndClientsReconnect(t *testing.T) {
	t.Parallel()
	srv := testenv.NATS(t)
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t.1", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	reconnects := nc.Stats().Reconnects

	srv.Restart(t)
	if srv.Server() == nil {
		t.Fatal("no server after Restart")
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		return nc.IsConnected() && nc.Stats().Reconnects > reconnects
	}, "client did not reconnect to %s", srv.URL())

	var msg *jetstream.RawStreamMsg
	testenv.Eventually(t, 10*time.Second, func() bool {
		msg, err = s.GetMsg(ctx, 1)
		return err == nil
	}, "message 1 not readable after restart")
	if string(msg.Data) != "kept" {
		t.Fatalf("message after restart = %q, want %q", msg.Data, "kept")
	}
	if _, err := js.Publish(ctx, "t.2", []byte("after")); err != nil {
		t.Fatalf("publish after restart: %v", err)
	}
}

func TestEventually(t *testing.T) {
	t.Parallel()
	calls := 0
	testenv.Eventually(t, time.Second, func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}
}

func TestPostgresFromPreparesOnceAndCopies(t *testing.T) {
	t.Parallel()
	var prepared atomic.Int32
	prepare := func(ctx context.Context, url string) error {
		prepared.Add(1)
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, "CREATE TABLE seeded (v int); INSERT INTO seeded VALUES (7)")
		return err
	}
	// A name of this run's own: -count reruns the test in the same binary.
	name := fmt.Sprintf("seeded-%p", &prepared)
	var urls []string
	for range 3 {
		url := testenv.PostgresFrom(t, name, prepare)
		var v int
		conn := connect(t, url)
		if err := conn.QueryRow(context.Background(), "SELECT v FROM seeded").Scan(&v); err != nil || v != 7 {
			t.Fatalf("copy of the template: v=%d err=%v", v, err)
		}
		// A write to one copy is not in the next.
		if _, err := conn.Exec(context.Background(), "INSERT INTO seeded VALUES (8)"); err != nil {
			t.Fatal(err)
		}
		urls = append(urls, url)
	}
	if n := prepared.Load(); n != 1 {
		t.Fatalf("template prepared %d times, want once", n)
	}
	for _, url := range urls {
		var n int
		if err := connect(t, url).QueryRow(context.Background(), "SELECT count(*) FROM seeded").Scan(&n); err != nil || n != 2 {
			t.Fatalf("%s: %d rows (err %v), want its own 2", url, n, err)
		}
	}
}
