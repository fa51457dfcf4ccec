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
		return pgErr.Code == "57P03" || pgErr.Code == "57P01" // cannot_connect_now, admin_shutdown
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
// resources, the connection lost, a timeout, or the transaction losing a race
// (serialization failure, deadlock). Such a failure is not the data's fault;
// a caller retrying work must not count it against the work (a message's
// deliveries). Anything else — a constraint, a value or statement the server
// refuses, a server that refuses us — is false.
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
		return false
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err)
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
