package processor

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
)

// TestSQLHandlerQueuesWhatReturnsNoOutputs: a statement without a payload
// column (an INSERT, a void function) goes to Event.Queue — with the
// batch's writes, no round trip of its own: Handle is given no transaction
// and never touches one — and one that returns type and payload does not.
func TestSQLHandlerQueuesWhatReturnsNoOutputs(t *testing.T) {
	ctx := context.Background()
	db, err := pgxpool.New(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Exec(ctx, `CREATE TABLE p (key text, body jsonb);
		CREATE FUNCTION f(k text) RETURNS void LANGUAGE sql AS $$ INSERT INTO p (key) VALUES (k) $$;
		CREATE FUNCTION g(k text) RETURNS TABLE (type text, payload jsonb) LANGUAGE sql AS $$ SELECT 'x', '{}'::jsonb $$;`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sql    string
		queued bool
	}{
		{"INSERT INTO p (key, body) VALUES (:key, :body)", true},
		{"SELECT f(:key)", true},
		{"SELECT * FROM g(:key)", false},
	} {
		t.Run(tc.sql, func(t *testing.T) {
			h, err := NewSQLHandler(ctx, db, config.Handler{Name: "h", SQL: tc.sql})
			if err != nil {
				t.Fatal(err)
			}
			if h.queued != tc.queued {
				t.Fatalf("queued %v, want %v", h.queued, tc.queued)
			}
			if !tc.queued {
				return
			}
			var q []*pgx.QueuedQuery
			ev := &Event{Key: envelope.Key{Integration: "demo", Account: "main", EventID: "e"}, Body: []byte(`{"a":1}`), queue: &q}
			msgs, err := h.Handle(ctx, nil, ev) // a nil tx: a round trip would panic
			if err != nil || len(msgs) != 0 {
				t.Fatalf("Handle = %v, %v", msgs, err)
			}
			if len(q) != 1 || q[0].SQL != h.sql || q[0].Arguments[0] != "demo/main/e" {
				t.Fatalf("queued %+v, want the statement with the event's key", q)
			}
		})
	}
}
