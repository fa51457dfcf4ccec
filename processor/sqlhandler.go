package processor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/textproto"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
)

// SQLSTATEs a SQL handler raises (RAISE … USING ERRCODE = 'IK001') to end
// an event: failed, or quarantined for an operator. Any other error is
// retried with the processor's backoff.
const (
	SQLStatePermanent  = "IK001"
	SQLStateQuarantine = "IK002"
)

// SQLHandler runs one configured statement (config.Handler) in the batch's
// inbox transaction. A statement with a payload column emits a message per
// row it returns; one without is queued with the batch's writes (Event.Queue),
// so group commit keeps its advantage.
type SQLHandler struct {
	name    string
	sql     string // positional, each parameter cast to its type
	params  []sqlParam
	role    string // sanitized identifier, or ""
	forward bool
	// queued: the statement's result is no output; typeCol and payloadCol
	// are the indexes of the type and payload columns (typeCol -1: none).
	queued              bool
	typeCol, payloadCol int
	usesBody            bool
}

// NewSQLHandler checks h against db and returns its handler: the statement
// must take only Intake's parameters and prepare (under h.Role when set,
// which must exist and hold no privilege on the intake schema). Every error
// names the handler.
func NewSQLHandler(ctx context.Context, db *pgxpool.Pool, h config.Handler) (*SQLHandler, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("handler %s: %s", h.Name, fmt.Sprintf(format, args...))
	}
	sql, params, err := bindNamed(h.SQL)
	if err != nil {
		return nil, fail("sql: %v", err)
	}
	s := &SQLHandler{name: h.Name, sql: sql, params: params, forward: h.Forward, typeCol: -1, payloadCol: -1}
	for _, p := range params {
		s.usesBody = s.usesBody || p.name == "body"
	}
	if h.Role != "" {
		s.role = pgx.Identifier{h.Role}.Sanitize()
		if err := checkRole(ctx, db, h.Role); err != nil {
			return nil, fail("role %s: %v", h.Role, err)
		}
	}
	desc, err := s.describe(ctx, db)
	if err != nil {
		return nil, fail("sql does not prepare: %v", err)
	}
	for i, f := range desc.Fields {
		switch f.Name {
		case "type":
			s.typeCol = i
		case "payload":
			s.payloadCol = i
		}
	}
	switch {
	case s.payloadCol >= 0:
	case s.typeCol >= 0:
		return nil, fail("sql returns a type column without a payload column: rows become messages only with a payload (jsonb)")
	default:
		s.queued = true
	}
	return s, nil
}

// describe prepares the statement in a transaction it rolls back, under
// the handler's role when it has one.
func (s *SQLHandler) describe(ctx context.Context, db *pgxpool.Pool) (*pgconn.StatementDescription, error) {
	var desc *pgconn.StatementDescription
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if s.role != "" {
			if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+s.role); err != nil {
				return err
			}
		}
		var err error
		desc, err = tx.Conn().Prepare(ctx, "", s.sql)
		if err != nil {
			return err
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	return desc, err
}

var errRollback = errors.New("rollback")

// checkRole refuses a role that does not exist, is a superuser (which no
// privilege check binds) or holds any privilege on the intake schema or a
// relation in it: a handler must not be able to forge inbox or outbox rows.
func checkRole(ctx context.Context, db *pgxpool.Pool, role string) error {
	var exists, super, onSchema bool
	err := db.QueryRow(ctx, `SELECT true, rolsuper,
		    coalesce(has_schema_privilege(rolname, $2, 'USAGE') OR has_schema_privilege(rolname, $2, 'CREATE'), false)
		  FROM pg_roles WHERE rolname = $1`, role, store.Schema).Scan(&exists, &super, &onSchema)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return errors.New("no such role")
	case err != nil:
		return err
	case super:
		return errors.New("is a superuser: it could write Intake's own tables")
	case onSchema:
		return fmt.Errorf("has privileges on schema %s: revoke them (REVOKE ALL ON SCHEMA %s FROM %s)", store.Schema, store.Schema, pgx.Identifier{role}.Sanitize())
	}
	var rel string
	err = db.QueryRow(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $2 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
		  AND has_table_privilege($1, c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
		ORDER BY c.relname LIMIT 1`, role, store.Schema).Scan(&rel)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("has privileges on %s.%s: revoke them (REVOKE ALL ON ALL TABLES IN SCHEMA %s FROM %s)", store.Schema, rel, store.Schema, pgx.Identifier{role}.Sanitize())
}

// Name is the handler's name in the configuration.
func (s *SQLHandler) Name() string { return s.name }

// Handle implements Handler.
func (s *SQLHandler) Handle(ctx context.Context, tx pgx.Tx, ev *Event) ([]Message, error) {
	ev.handler = s.name
	if s.usesBody {
		if !json.Valid(ev.Body) {
			return nil, Permanent(fmt.Errorf("handler %s: the body is not valid JSON and the statement takes :body (use :raw)", s.name))
		}
		if holdsNUL(ev.Body) {
			return nil, Permanent(fmt.Errorf("handler %s: the body holds \\u0000, which jsonb refuses, and the statement takes :body (use :raw)", s.name))
		}
	}
	args, err := s.args(ev)
	if err != nil {
		return nil, err
	}
	var msgs []Message
	if s.queued {
		if s.role != "" {
			ev.Queue("SET LOCAL ROLE " + s.role)
		}
		ev.Queue(s.sql, args...)
		if s.role != "" {
			ev.Queue("RESET ROLE")
		}
	} else if msgs, err = s.query(ctx, tx, ev, args); err != nil {
		return nil, err
	}
	if s.forward {
		fwd, _ := Forward().Handle(ctx, tx, ev)
		msgs = append(msgs, fwd...)
	}
	return msgs, nil
}

// holdsNUL reports whether the JSON document b has a string (or key)
// holding U+0000: valid JSON that jsonb refuses (22P05), which no retry
// would fix.
func holdsNUL(b []byte) bool {
	if !bytes.Contains(b, []byte(`\u0000`)) {
		return false // the only way JSON writes U+0000
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if s, ok := tok.(string); ok && strings.IndexByte(s, 0) >= 0 {
			return true
		}
	}
}

// query runs the statement and turns its rows into messages.
func (s *SQLHandler) query(ctx context.Context, tx pgx.Tx, ev *Event, args []any) ([]Message, error) {
	if s.role != "" {
		if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+s.role); err != nil {
			return nil, s.classify(err)
		}
	}
	rows, err := tx.Query(ctx, s.sql, args...)
	if err != nil {
		return nil, s.classify(err)
	}
	var (
		msgs []Message
		bad  error
	)
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			rows.Close()
			return nil, s.classify(err)
		}
		if bad != nil {
			continue
		}
		m, err := s.message(ev, vals, rows.RawValues()[s.payloadCol], rows.FieldDescriptions()[s.payloadCol])
		if err != nil {
			bad = err
			continue
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify(err)
	}
	if bad != nil {
		return nil, Permanent(fmt.Errorf("handler %s: row %d: %w", s.name, len(msgs)+1, bad))
	}
	if s.role != "" {
		if _, err := tx.Exec(ctx, "RESET ROLE"); err != nil {
			return nil, s.classify(err)
		}
	}
	return msgs, nil
}

// message is one returned row as an outbox message.
func (s *SQLHandler) message(ev *Event, vals []any, raw []byte, fd pgconn.FieldDescription) (Message, error) {
	typ := ev.EventType
	if s.typeCol >= 0 && vals[s.typeCol] != nil {
		t, ok := vals[s.typeCol].(string)
		if !ok {
			return Message{}, fmt.Errorf("type is %T, not text", vals[s.typeCol])
		}
		if t != "" {
			typ = t
		}
	}
	if raw == nil {
		return Message{}, errors.New("payload is null")
	}
	// The payload's bytes as the statement made them (not decoded and
	// encoded again): jsonb's binary form is a version byte and the text.
	data := raw
	switch fd.DataTypeOID {
	case pgtype.JSONBOID:
		if fd.Format == pgtype.BinaryFormatCode {
			if len(raw) == 0 || raw[0] != 1 {
				return Message{}, errors.New("payload: unknown jsonb format")
			}
			data = raw[1:]
		}
	case pgtype.JSONOID, pgtype.TextOID, pgtype.VarcharOID:
	case pgtype.ByteaOID:
		if fd.Format != pgtype.BinaryFormatCode {
			return Message{}, errors.New("payload: bytea in text format")
		}
	default:
		return Message{}, fmt.Errorf("payload is of type oid %d, not jsonb", fd.DataTypeOID)
	}
	if !json.Valid(data) {
		return Message{}, errors.New("payload is not valid JSON")
	}
	data = append([]byte(nil), data...) // raw is pgx's buffer, reused by the next row
	return Message{
		Subject: envelope.SubjectOut(ev.Tenant, ev.Key.Integration, typ),
		Header:  IdentityHeader(ev),
		Data:    data,
	}, nil
}

// args are the statement's parameter values for ev.
func (s *SQLHandler) args(ev *Event) ([]any, error) {
	var headers []byte
	for _, p := range s.params {
		if p.name == "headers" {
			b, err := json.Marshal(providerHeaders(ev))
			if err != nil {
				return nil, Permanent(fmt.Errorf("handler %s: headers: %w", s.name, err))
			}
			headers = b
		}
	}
	args := make([]any, len(s.params))
	for i, p := range s.params {
		args[i] = p.value(ev, headers)
	}
	return args, nil
}

// providerHeaders is what :headers binds: the provider's retry headers
// ingress kept (Event.RetryHints) and any header of the message that is not
// Intake's own (Intake-*, Nats-*, trace context), first value each.
func providerHeaders(ev *Event) map[string]string {
	h := map[string]string{}
	for k, v := range ev.Header {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if len(v) == 0 || strings.HasPrefix(ck, "Intake-") || strings.HasPrefix(ck, "Nats-") ||
			ck == "Traceparent" || ck == "Tracestate" {
			continue
		}
		h[k] = v[0]
	}
	for k, v := range ev.RetryHints {
		h[k] = v
	}
	return h
}

// classify maps the statement's SQLSTATE to the event's fate.
func (s *SQLHandler) classify(err error) error {
	return classifySQLState(fmt.Errorf("handler %s: %w", s.name, err))
}

// classifySQLState wraps err with Permanent when Postgres raised IK001 and
// with Quarantine for IK002; any other error is returned as it is (retried).
func classifySQLState(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case SQLStatePermanent:
		return Permanent(err)
	case SQLStateQuarantine:
		return Quarantine(err)
	}
	return err
}

// SQLRouter builds the configured handlers (NewSQLHandler, each checked
// against db) into a Router: in the order listed, each on every integration
// it lists (or all) × every type pattern (or "*"); the first match wins and
// an unmatched event is forwarded.
func SQLRouter(ctx context.Context, db *pgxpool.Pool, handlers []config.Handler) (*Router, error) {
	r := NewRouter()
	var errs []error
	for _, h := range handlers {
		sh, err := NewSQLHandler(ctx, db, h)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		integrations, types := h.Integrations, h.Types
		if len(integrations) == 0 {
			integrations = []string{""}
		}
		if len(types) == 0 {
			types = []string{"*"}
		}
		for _, in := range integrations {
			for _, t := range types {
				r.OnIntegration(in, t, sh)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return r, nil
}
