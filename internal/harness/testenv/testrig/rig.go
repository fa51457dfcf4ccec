package testrig

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
)

// Options say what New starts. The zero value is JetStream and a migrated
// database, without the app.
type Options struct {
	// Config is the YAML configuration (environment ignored); its nats.url
	// and postgres.url are set to the rig's. Empty means the defaults.
	Config string
	// Mutate, when set, edits the parsed configuration before anything
	// starts (stream settings included).
	Mutate func(*config.Config)
	// DatabaseURL is a database to use instead of a fresh copy of the
	// template, such as one on a private cluster (testenv.PrivatePostgres);
	// New migrates it.
	DatabaseURL string
	// Via, when set, rewrites the database's URL for the app (its
	// postgres.url) once the database is migrated: a pooler in front
	// (testenv.PgBouncer.Via), a pgx query mode. Rig.Store stays direct.
	Via func(url string) string
	// NoDatabase leaves Postgres out (an ingress-only rig).
	NoDatabase bool
	// MaxConns bounds Rig.Store's pool. Defaults to 8.
	MaxConns int32
	// App, when set, starts app.Run with these options (roles, handler…)
	// on the rig's NATS and database.
	App *intake.Options
}

// Rig is NATS with the streams, a database with the schema, and perhaps the
// app, all private to one test.
type Rig struct {
	*JetStream
	Config *config.Config
	// DBURL is the database's URL; Store and DB are a pool on it (nil with
	// NoDatabase).
	DBURL string
	Store *store.Store
	DB    *pgxpool.Pool
	// App is the running app, when Options.App was set.
	App *App
}

// New starts what o asks for and stops it all when the test ends.
func New(t testing.TB, o Options) *Rig {
	t.Helper()
	cfg := ParseConfig(t, o.Config)
	if o.Mutate != nil {
		o.Mutate(cfg)
	}
	r := &Rig{Config: cfg}
	// The streams the config describes; a config without a stream section
	// gets production defaults (30 days), which tests do not mind.
	r.JetStream = NATS(t, cfg.NATS.Stream)
	cfg.NATS.URL = r.Server.URL()
	if !o.NoDatabase {
		switch r.DBURL = o.DatabaseURL; r.DBURL {
		case "":
			r.DBURL = Database(t)
		default:
			Migrate(t, r.DBURL)
		}
		cfg.Postgres.URL = r.DBURL
		if o.Via != nil {
			cfg.Postgres.URL = o.Via(r.DBURL)
		}
		if o.MaxConns == 0 {
			o.MaxConns = 8
		}
		r.Store = Store(t, r.DBURL, o.MaxConns)
		r.DB = r.Store.Pool()
	}
	if o.App != nil {
		r.App = StartApp(t, cfg, *o.App)
	}
	return r
}

// ParseConfig parses a YAML configuration without reading the environment.
func ParseConfig(t testing.TB, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("testrig: config: %v", err)
	}
	return cfg
}

// Count runs a query returning one integer (a count) on the rig's database.
func (r *Rig) Count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := r.DB.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("testrig: %s: %v", query, err)
	}
	return n
}

// Settled waits until the inbox holds want rows and the outbox has nothing
// left to publish: from then on INTAKE_OUT holds everything those events
// will produce.
func (r *Rig) Settled(t testing.TB, want int, timeout time.Duration) {
	t.Helper()
	var rows, pending int
	testenv.Eventually(t, timeout, func() bool {
		err := r.DB.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM intake.inbox),
			(SELECT count(*) FROM intake.outbox_pending)`).Scan(&rows, &pending)
		return err == nil && rows == want && pending == 0
	}, "inbox never reached %d rows with an empty outbox", want)
}

// CaughtUp waits until the processor's consumer has acknowledged every
// message in INTAKE_IN and the outbox has nothing left to publish.
func (r *Rig) CaughtUp(t testing.TB, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, func() bool {
		ctx := context.Background()
		c, err := r.JS.Consumer(ctx, envelope.StreamIn, envelope.ConsumerName)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		if err != nil {
			return false
		}
		s, err := r.JS.Stream(ctx, envelope.StreamIn)
		if err != nil {
			return false
		}
		si, err := s.Info(ctx)
		if err != nil {
			return false
		}
		var pending int
		if err := r.DB.QueryRow(ctx, `SELECT count(*) FROM intake.outbox_pending`).Scan(&pending); err != nil {
			return false
		}
		return info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream == si.State.LastSeq && pending == 0
	}, "processor never caught up with INTAKE_IN")
}
