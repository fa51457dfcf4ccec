package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ConsoleSession is one signed-in session of the operator console
// (intake.console_sessions, migration 00016). The row is keyed by the
// SHA-256 of the session's id; the id itself is only in the browser's
// cookie.
type ConsoleSession struct {
	// TokenID names the api.tokens entry the session signed in with; the
	// console refuses a session whose token its config no longer has.
	TokenID string
	// TokenName and Role are the token's at sign-in.
	TokenName string
	Role      string
	// CSRF is the session's random CSRF token.
	CSRF      string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// CreateConsoleSession stores a new session under id's SHA-256 and, in the
// same transaction, deletes every session that expired by cs.CreatedAt;
// it returns how many it deleted.
func (s *Store) CreateConsoleSession(ctx context.Context, id [sha256.Size]byte, cs ConsoleSession) (expired int64, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM intake.console_sessions WHERE expires_at <= $1`, cs.CreatedAt)
		if err != nil {
			return err
		}
		expired = tag.RowsAffected()
		_, err = tx.Exec(ctx, `INSERT INTO intake.console_sessions
			(id_sha256, token_id, token_name, role, csrf, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, id[:], cs.TokenID, cs.TokenName, cs.Role, cs.CSRF, cs.CreatedAt, cs.ExpiresAt)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: create console session: %w", err)
	}
	return expired, nil
}

// ConsoleSession reads the session stored under id that is good at now:
// its expiry ahead and its sign-in less than maxAge before now, whatever
// expiry the row names. ErrNotFound when there is none.
func (s *Store) ConsoleSession(ctx context.Context, id [sha256.Size]byte, now time.Time, maxAge time.Duration) (ConsoleSession, error) {
	var cs ConsoleSession
	err := s.pool.QueryRow(ctx, `SELECT token_id, token_name, role, csrf, created_at, expires_at
		FROM intake.console_sessions
		WHERE id_sha256 = $1 AND expires_at > $2 AND created_at > $2::timestamptz - $3::interval`, id[:], now, maxAge).
		Scan(&cs.TokenID, &cs.TokenName, &cs.Role, &cs.CSRF, &cs.CreatedAt, &cs.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return ConsoleSession{}, ErrNotFound
	}
	if err != nil {
		return ConsoleSession{}, fmt.Errorf("store: read console session: %w", err)
	}
	return cs, nil
}

// DeleteConsoleSession ends the session stored under id (a sign-out) on
// every replayer at once; none stored is not an error.
func (s *Store) DeleteConsoleSession(ctx context.Context, id [sha256.Size]byte) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM intake.console_sessions WHERE id_sha256 = $1`, id[:]); err != nil {
		return fmt.Errorf("store: delete console session: %w", err)
	}
	return nil
}
