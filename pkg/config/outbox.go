package config

import "time"

// Outbox configures the relay from the outbox table to INTAKE_OUT. A
// processor publishes its own rows right after each commit; the relay
// publishes the rows still pending after RelayAfter.
type Outbox struct {
	// PollInterval is how often the relay looks for pending rows. Defaults
	// to DefaultPollInterval (1s).
	PollInterval time.Duration `yaml:"poll_interval"`
	// RelayAfter is how long a row stays pending before the relay publishes
	// it (a processor that died or lost NATS after its commit). At most half
	// the streams' duplicate window, so that the relay's copy of a row the
	// processor published but did not get to mark still lands inside the
	// window and is dropped. Defaults to DefaultRelayAfter (5s), or half the
	// duplicate window if that is shorter: see WithDefaults.
	RelayAfter time.Duration `yaml:"relay_after"`
	// BatchSize is the number of rows published per claim. Defaults to
	// DefaultOutboxBatchSize (500).
	BatchSize int `yaml:"batch_size"`
	// Retention is how long published rows stay in the table (for
	// redelivery from the outbox) before the relay deletes them. Defaults to
	// DefaultRetention (72h).
	Retention time.Duration `yaml:"retention"`
}

// Defaults of the outbox section.
const (
	DefaultPollInterval    = time.Second
	DefaultRelayAfter      = 5 * time.Second
	DefaultOutboxBatchSize = 500
	DefaultRetention       = 72 * time.Hour
)

// WithDefaults returns o with every unset field at its default.
// duplicateWindow is nats.stream.duplicate_window (after its own default):
// relay_after defaults to the shorter of DefaultRelayAfter and half of it.
func (o Outbox) WithDefaults(duplicateWindow time.Duration) Outbox {
	setDefault(&o.PollInterval, DefaultPollInterval)
	setDefault(&o.RelayAfter, min(DefaultRelayAfter, duplicateWindow/2))
	setDefault(&o.BatchSize, DefaultOutboxBatchSize)
	setDefault(&o.Retention, DefaultRetention)
	return o
}

// Validate checks the section against nats.stream.duplicate_window; errors
// name the YAML field.
func (o Outbox) Validate(duplicateWindow time.Duration) error {
	var p problems
	if o.PollInterval <= 0 {
		p.add("outbox.poll_interval", "must be positive, got %s", o.PollInterval)
	}
	if o.RelayAfter <= 0 || o.RelayAfter > duplicateWindow/2 {
		p.add("outbox.relay_after", "must be positive and at most half of nats.stream.duplicate_window (%s), got %s",
			duplicateWindow, o.RelayAfter)
	}
	if o.BatchSize < 1 {
		p.add("outbox.batch_size", "must be at least 1, got %d", o.BatchSize)
	}
	if o.Retention <= 0 {
		p.add("outbox.retention", "must be positive, got %s", o.Retention)
	}
	return p.err()
}
