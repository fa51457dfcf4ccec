package store

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// Postgres errors are interpreted here and nowhere else: callers ask these
// questions and decide to wait, retry or give up, without knowing SQLSTATE
// classes or pgconn's error types.

// Unreachable reports whether err means the server could not be reached or
// is starting or shutting down — worth waiting for — rather than refusing us
// (bad credentials, unknown database).
func Unreachable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
			return true
		}
		return false
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		// A ConnectError wraps the server's answer when there was one.
		return !errors.As(connErr.Unwrap(), &pgErr) || pgErr.Code == "57P03"
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

// Transient reports whether err is a failure that running the same
// statements again can fix: the server unreachable, restarting or out of
// resources, the connection lost (also during COMMIT, when the outcome is
// unknown), a timeout, the transaction losing a race (serialization failure,
// deadlock, a standby's recovery conflict), or the server being read-only
// (ReadOnly: a standby, or an old primary back after a failover). Such a
// failure is not the data's fault; a caller retrying work must not count it
// against the work (a message's deliveries). Anything else — a constraint, a
// value or statement the server refuses, a server that refuses us — is false.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if len(pgErr.Code) < 2 {
			return false
		}
		switch pgErr.Code[:2] {
		case "08", // connection exception
			"40", // transaction rollback: serialization failure, deadlock
			"53", // insufficient resources
			"57": // operator intervention: shutdown, cannot connect now
			return true
		}
		return pgErr.Code == readOnlySQLTransaction
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err)
}

// readOnlySQLTransaction is SQLSTATE 25006: a write on a server that takes
// none (a hot standby, or default_transaction_read_only on).
const readOnlySQLTransaction = "25006"

// ReadOnly reports whether err is a write refused because the server is
// read-only: the DSN reached a standby, or an old primary that came back
// read-only after a failover. It is Transient: the work waits for a writable
// primary. The Store drops its pool's connections when it sees one (Open),
// so the next attempt connects again — with a multi-host DSN and
// target_session_attrs=read-write, to the promoted primary.
func ReadOnly(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == readOnlySQLTransaction
}

// serverGone reports whether an error the server sent (SQLSTATE code) means
// every connection of the pool may be on the wrong server or dead: it is
// read-only, or it is shutting down (a failover's old primary). The pool then
// drops its connections instead of finding them bad one attempt at a time.
func serverGone(code string) bool {
	switch code {
	case readOnlySQLTransaction, "57P01", "57P02": // read-only, admin_shutdown, crash_shutdown
		return true
	}
	return false
}

// Refused reports whether err is the server refusing a value the statement
// carried — a data exception (SQLSTATE class 22: a NUL or invalid UTF-8 in
// text, a number out of range, bad JSON) or an integrity constraint (23).
// Running the same statement again fails again; the data is at fault, not
// the server nor the schema (an unknown table or a missing privilege is
// neither Transient nor Refused: an operator must act, and the work waits).
func Refused(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) < 2 {
		return false
	}
	return pgErr.Code[:2] == "22" || pgErr.Code[:2] == "23"
}

// Away reports whether err means the database itself is away or takes no
// writes — unreachable, shutting down, read-only, the connection lost —
// rather than a statement losing a race or running out of time. A caller
// holding work through an outage (the processor stops pulling) asks this;
// Transient is the wider "worth running again".
func Away(err error) bool {
	if err == nil {
		return false
	}
	if Unreachable(err) || ReadOnly(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return len(pgErr.Code) >= 2 && pgErr.Code[:2] == "08" || pgErr.Code == "57P02"
	}
	var connErr *pgconn.ConnectError
	return errors.As(err, &connErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// FromPostgres reports whether err is Postgres's own: an error the server
// sent, or a failure to connect to it. A caller that also runs other code
// inside a transaction (the processor's handlers, calling their own
// services) asks this to tell the database's failure from that code's.
func FromPostgres(err error) bool {
	var pgErr *pgconn.PgError
	var connErr *pgconn.ConnectError
	return errors.As(err, &pgErr) || errors.As(err, &connErr)
}
