package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/store"
)

// realErrors makes errors the way production meets them: pgx talking to a
// real server, or to a port nobody listens on.
func realErrors(t *testing.T) map[string]error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := testenv.Postgres(t)
	errs := map[string]error{}

	_, err := pgconn.Connect(ctx, "postgres://intake@127.0.0.1:"+strconv.Itoa(testenv.FreePort(t))+"/x?connect_timeout=5")
	errs["connection refused"] = err

	u, _ := url.Parse(dbURL)
	u.Path = "/no_such_database"
	_, err = pgconn.Connect(ctx, u.String())
	errs["unknown database"] = err

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	_, errs["division by zero"] = conn.Exec(ctx, `SELECT 1/0`)
	_, errs["undefined table"] = conn.Exec(ctx, `SELECT * FROM no_such_table`)
	_, errs["unique violation"] = conn.Exec(ctx,
		`CREATE TEMP TABLE u (id int PRIMARY KEY); INSERT INTO u VALUES (1), (1)`)
	_, errs["serialization failure"] = conn.Exec(ctx,
		`DO $$ BEGIN RAISE EXCEPTION 'lost a race' USING ERRCODE = 'serialization_failure'; END $$`)
	_, errs["deadlock"] = conn.Exec(ctx,
		`DO $$ BEGIN RAISE EXCEPTION 'deadlock' USING ERRCODE = 'deadlock_detected'; END $$`)
	_, errs["too many connections"] = conn.Exec(ctx,
		`DO $$ BEGIN RAISE EXCEPTION 'full' USING ERRCODE = 'too_many_connections'; END $$`)

	// The server ends our own session: what a restart or failover looks like.
	victim, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close(ctx)
	_, errs["admin shutdown"] = victim.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
	_, errs["closed connection"] = victim.Exec(ctx, `SELECT 1`)

	// The connection is lost with a transaction open: its COMMIT cannot
	// tell whether anything committed.
	lost, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer lost.Close(ctx)
	tx, err := lost.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, lost.PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	errs["connection lost at commit"] = tx.Commit(ctx)

	tctx, tcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer tcancel()
	_, errs["statement timeout (ctx)"] = conn.Exec(tctx, `SELECT pg_sleep(5)`)
	for name, err := range errs {
		if err == nil {
			t.Fatalf("%s: got no error", name)
		}
	}
	return errs
}

func TestTransientAndUnreachable(t *testing.T) {
	t.Parallel()
	real := realErrors(t)
	for _, tc := range []struct {
		name        string
		err         error
		transient   bool
		unreachable bool
	}{
		// From a real server, or a real refusal to connect.
		{"connection refused", real["connection refused"], true, true},
		{"unknown database", real["unknown database"], false, false},
		{"division by zero", real["division by zero"], false, false},
		{"undefined table", real["undefined table"], false, false},
		{"unique violation", real["unique violation"], false, false},
		{"serialization failure", real["serialization failure"], true, false},
		{"deadlock", real["deadlock"], true, false},
		{"too many connections", real["too many connections"], true, false},
		{"admin shutdown", real["admin shutdown"], true, true},
		{"closed connection", real["closed connection"], true, false},
		{"connection lost at commit", real["connection lost at commit"], true, true}, // the server said why: 57P01
		{"statement timeout (ctx)", real["statement timeout (ctx)"], true, true},     // a timeout is a net.Error
		{"wrapped serialization failure", fmt.Errorf("inbox: %w", real["serialization failure"]), true, false},

		// Values pgx returns, built directly.
		{"cannot connect now", &pgconn.PgError{Code: "57P03"}, true, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true, false},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, true, true},
		{"read-only transaction", &pgconn.PgError{Code: "25006"}, true, false}, // a standby: see TestAStandbyIsReadOnly
		{"recovery conflict", &pgconn.PgError{Code: "40001"}, true, false},
		{"other invalid transaction state", &pgconn.PgError{Code: "25P02"}, false, false},
		{"check violation", &pgconn.PgError{Code: "23514"}, false, false},
		{"empty code", &pgconn.PgError{}, false, false},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true, false},
		{"deadline", context.DeadlineExceeded, true, true},

		// Not Postgres' doing.
		{"nil", nil, false, false},
		{"cancelled", context.Canceled, false, false},
		{"not found", store.ErrNotFound, false, false},
		{"plain", errors.New("handler: bad payload"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := store.Transient(tc.err); got != tc.transient {
				t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.transient)
			}
			if got := store.Unreachable(tc.err); got != tc.unreachable {
				t.Errorf("Unreachable(%v) = %v, want %v", tc.err, got, tc.unreachable)
			}
		})
	}
}

func TestRefused(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "22021"}, true},  // invalid byte sequence (NUL in text)
		{&pgconn.PgError{Code: "22P05"}, true},  // untranslatable character (\u0000 in jsonb)
		{&pgconn.PgError{Code: "23505"}, true},  // unique violation
		{&pgconn.PgError{Code: "42P01"}, false}, // undefined table: the schema, not the data
		{&pgconn.PgError{Code: "40001"}, false}, // serialization failure: transient
		{&pgconn.PgError{Code: "25006"}, false}, // read-only: the server, not the data
		{errors.New("plain"), false},
		{nil, false},
	} {
		if got := store.Refused(c.err); got != c.want {
			t.Errorf("Refused(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestFromPostgres(t *testing.T) {
	t.Parallel()
	real := realErrors(t)
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		// The server answered with an error, or could not be connected to.
		{"connection refused", real["connection refused"], true},
		{"unknown database", real["unknown database"], true},
		{"division by zero", real["division by zero"], true},
		{"admin shutdown", real["admin shutdown"], true},
		{"wrapped serialization failure", fmt.Errorf("inbox: %w", real["serialization failure"]), true},
		{"read-only transaction", &pgconn.PgError{Code: "25006"}, true},

		// A lost connection or a deadline carries no answer from Postgres:
		// it could be any network call's.
		{"closed connection", real["closed connection"], false},
		{"statement timeout (ctx)", real["statement timeout (ctx)"], false},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), false},
		{"deadline", context.DeadlineExceeded, false},
		{"nil", nil, false},
		{"plain", errors.New("downstream: bad gateway"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := store.FromPostgres(tc.err); got != tc.want {
				t.Errorf("FromPostgres(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
