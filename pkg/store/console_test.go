package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/intakehq/intake/pkg/store"
)

// TestConsoleSessions: a session reads back while good, not past its
// expiry, not past maxAge from its sign-in whatever expiry it names, not
// after its deletion; a new session clears the expired ones.
func TestConsoleSessions(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	ttl := 8 * time.Hour
	id := sha256.Sum256([]byte("session one"))
	cs := store.ConsoleSession{TokenID: "tid", TokenName: "ops", Role: "operator", CSRF: "c", CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if _, err := st.CreateConsoleSession(ctx, id, cs); err != nil {
		t.Fatal(err)
	}
	got, err := st.ConsoleSession(ctx, id, now.Add(time.Minute), ttl)
	if err != nil || got.TokenID != "tid" || got.TokenName != "ops" || got.Role != "operator" || got.CSRF != "c" ||
		!got.CreatedAt.Equal(now) || !got.ExpiresAt.Equal(now.Add(ttl)) {
		t.Fatalf("ConsoleSession = %+v, %v; want %+v", got, err, cs)
	}
	for name, at := range map[string]struct {
		now    time.Time
		maxAge time.Duration
		id     [32]byte
	}{
		"at its expiry":           {now.Add(ttl), ttl, id},
		"past a shorter max age":  {now.Add(2 * time.Hour), time.Hour, id},
		"another id":              {now, ttl, sha256.Sum256([]byte("session two"))},
		"the id's hash as the id": {now, ttl, sha256.Sum256(id[:])},
	} {
		if _, err := st.ConsoleSession(ctx, at.id, at.now, at.maxAge); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: err = %v, want ErrNotFound", name, err)
		}
	}
	// A row naming a far expiry still ends at sign-in + max age.
	far := sha256.Sum256([]byte("far"))
	if _, err := st.CreateConsoleSession(ctx, far, store.ConsoleSession{TokenID: "tid", TokenName: "ops", Role: "operator", CSRF: "c",
		CreatedAt: now, ExpiresAt: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ConsoleSession(ctx, far, now.Add(ttl+time.Second), ttl); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a session expiring in 2100, 8 h after sign-in: err = %v, want ErrNotFound", err)
	}
	if err := st.DeleteConsoleSession(ctx, far); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ConsoleSession(ctx, far, now, ttl); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a deleted session: err = %v, want ErrNotFound", err)
	}
	if err := st.DeleteConsoleSession(ctx, far); err != nil {
		t.Errorf("deleting it again: %v", err)
	}
	// A sign-in after the first session expired deletes it.
	later := now.Add(ttl + time.Minute)
	expired, err := st.CreateConsoleSession(ctx, sha256.Sum256([]byte("later")), store.ConsoleSession{TokenID: "tid", TokenName: "ops",
		Role: "operator", CSRF: "c", CreatedAt: later, ExpiresAt: later.Add(ttl)})
	if err != nil || expired != 1 {
		t.Fatalf("CreateConsoleSession after an expiry = %d, %v; want 1 expired row deleted", expired, err)
	}
	var n int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM intake.console_sessions`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d session rows (%v), want the new one only", n, err)
	}
}
