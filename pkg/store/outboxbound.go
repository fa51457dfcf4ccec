package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/pressly/goose/v3"
)

// The outbox's move to daily partitions takes three migrations (00013–00015,
// one transaction each). 00013 bounds the existing outbox, NOT VALID:
// created_at must be before midnight UTC at least a day ahead. That bound
// holds for new rows from then on, so it is a deadline: if the chain stops
// after 00013 (00014's scan cancelled, the migrate Job past its deadline)
// and the previous release keeps running, every outbox insert fails once
// the bound has passed, and processing stalls (nothing is lost: the events
// wait in INTAKE_IN) until `intake migrate` runs again.
const outboxBoundVersion = 13

// outboxDisarmTimeout bounds the undoing of 00013 after a failed run, whose
// own context may be the one that ended it.
const outboxDisarmTimeout = 30 * time.Second

// disarmOutboxBound undoes 00013 (drops the bound) when a Migrate run
// failed with the database at exactly that version, so that a stopped
// rollout leaves no deadline behind; the next run applies it again. It
// needs an exclusive lock on the outbox for a moment (00013's Down).
func disarmOutboxBound(ctx context.Context, p *goose.Provider, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outboxDisarmTimeout)
	defer cancel()
	v, err := p.GetDBVersion(ctx)
	if err != nil || v != outboxBoundVersion {
		return nil // not stopped there (or unknown: the error that ended the run says more)
	}
	if _, err := p.DownTo(ctx, outboxBoundVersion-1); err != nil {
		return fmt.Errorf("migration %05d applied but %05d did not finish, and undoing %05d failed: %w; "+
			"run `intake migrate` again before the bound passes (SELECT pg_get_constraintdef(oid) FROM pg_constraint "+
			"WHERE conname = 'outbox_legacy_until'), or the outbox refuses new rows after it",
			outboxBoundVersion, outboxBoundVersion+1, outboxBoundVersion, err)
	}
	if log != nil {
		log.Warn("migrations stopped after 00013 (the outbox's bound); undid 00013 so that the outbox takes rows "+
			"past its bound; run intake migrate again", "version", outboxBoundVersion-1)
	}
	return nil
}
