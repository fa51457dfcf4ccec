package store_test

import (
	"context"
	neturl "net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/internal/harness/faultproxy"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/store"
)

// through is url with its host:port replaced by a fault proxy's to it.
func through(t *testing.T, url string) (string, *faultproxy.Proxy) {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	u.Host = p.Addr()
	return u.String(), p
}

// A dial into a partition (accepted, never answered) gives up by itself
// (connect_timeout, store.DefaultConnectTimeout) instead of hanging the
// caller and filling the pool.
func TestADialIntoAPartitionGivesUp(t *testing.T) {
	t.Parallel()
	url, p := through(t, testenv.Postgres(t))
	p.SetMode(faultproxy.Blackhole)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, url, 2)
	if err == nil {
		st.Close()
		t.Fatal("Open through a blackhole succeeded")
	}
	if ctx.Err() != nil {
		t.Fatalf("Open waited for the caller's deadline: %v", err)
	}
	if !store.Unreachable(err) {
		t.Errorf("Open through a blackhole: %v, want an unreachable server (waited for)", err)
	}
}

// A transaction whose client vanished mid-way (its flow blackholed) is
// ended by the server (idle_in_transaction_session_timeout), which
// releases its locks: a partition must not leave Intake's keys locked.
func TestAnAbandonedTransactionIsEndedByTheServer(t *testing.T) {
	t.Parallel()
	direct := testenv.Postgres(t)
	url, p := through(t, direct)
	ctx := context.Background()
	st, err := store.Open(ctx, url, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pid int32
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid() FROM (SELECT pg_advisory_xact_lock(4242)) AS l`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	p.SetMode(faultproxy.Blackhole)
	defer func() {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_ = tx.Rollback(ctx) // into the blackhole: gives up
	}()

	db, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	testenv.Eventually(t, time.Minute, func() bool {
		var gone bool
		err := db.QueryRow(ctx, `SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1)`, pid).Scan(&gone)
		return err == nil && gone
	}, "the abandoned transaction's session was never ended by the server")
	var locked bool
	if err := db.QueryRow(ctx, `SELECT pg_try_advisory_lock(4242)`).Scan(&locked); err != nil || !locked {
		t.Fatalf("the abandoned transaction's lock: taken %t, %v; want it released", locked, err)
	}
}

// The session bounds are Intake's defaults unless the URL says otherwise;
// an empty idle_in_transaction_session_timeout sends none (the server's
// setting applies: for poolers that refuse startup parameters).
func TestSessionTimeoutsDefaultAndYieldToTheURL(t *testing.T) {
	t.Parallel()
	base := testenv.Postgres(t)
	for _, tt := range []struct{ query, want string }{
		{"", store.DefaultIdleInTransactionTimeout},
		{"idle_in_transaction_session_timeout=2min", "2min"},
		{"idle_in_transaction_session_timeout=", "0"},
	} {
		u, err := neturl.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		for k, v := range must(neturl.ParseQuery(tt.query)) {
			q[k] = v
		}
		u.RawQuery = q.Encode()
		st, err := store.Open(context.Background(), u.String(), 1)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = st.Pool().QueryRow(context.Background(), `SHOW idle_in_transaction_session_timeout`).Scan(&got)
		st.Close()
		if err != nil || got != tt.want {
			t.Errorf("url ?%s: idle_in_transaction_session_timeout = %q (%v), want %q", tt.query, got, err, tt.want)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
