package config

// Postgres configures the database connection.
type Postgres struct {
	// URL of the database. Overridden by DATABASE_URL. Empty: `intake dev`
	// starts a private cluster from the PostgreSQL binaries on PATH.
	URL string `yaml:"url"`
	// MaxConns caps the pool. Defaults to DefaultMaxConns (10).
	MaxConns int32 `yaml:"max_conns"`
}

// DefaultMaxConns is postgres.max_conns when unset.
const DefaultMaxConns = 10

// WithDefaults returns p with every unset field at its default.
func (p Postgres) WithDefaults() Postgres {
	setDefault(&p.MaxConns, DefaultMaxConns)
	return p
}

// Validate checks the section; errors name the YAML field.
func (p Postgres) Validate() error {
	var errs problems
	if p.MaxConns < 1 {
		errs.add("postgres.max_conns", "must be at least 1, got %d", p.MaxConns)
	}
	return errs.err()
}
