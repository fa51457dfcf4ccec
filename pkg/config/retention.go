package config

import (
	"fmt"
	"time"

	"github.com/intakehq/intake/pkg/provider"
)

// Retention says how long Postgres keeps each kind of row; the processor
// purges what is older (processor/purge.go, `intake purge`). Three ages:
// the inbox (the dedup record; an event's delivery history and executions
// go with its inbox row), the history (receipts of deliveries the inbox
// never held) and the evidence (conflicts, failed and
// quarantined inbox rows, rejected messages, the replay audit: kept
// longest). The outbox has its own (outbox.retention) and INTAKE_IN /
// INTAKE_OUT theirs (nats.stream.max_age). object_versions is not purged: it
// holds a row per business object, not per event.
type Retention struct {
	// Inbox is how long a processed or stale inbox row (with its delivery
	// history and executions), and the replay guard's record of its body,
	// outlive the event's last delivery. Defaults to
	// DefaultInboxRetention (90 days, 2160h). At least an hour more than
	// nats.stream.max_age (a message the stream still holds may come back
	// by re-drive or replay; the hour covers the gap between ingress's
	// clock and the stream's) and each integration's provider retry window
	// (provider.RetryWindow); an integration may set its own with
	// integrations[].inbox_retention.
	Inbox time.Duration `yaml:"inbox"`
	// History is how long delivery receipts (by received_at) of events the
	// inbox does not hold are kept: deliveries answered duplicate or
	// unavailable that were never processed. An event's own history and
	// executions go with its inbox row. Defaults to Inbox; at most Inbox.
	History time.Duration `yaml:"history"`
	// Evidence is how long conflicts, failed and quarantined inbox rows,
	// rejected messages and replays with their items are kept. Defaults to
	// DefaultEvidenceRetention (365 days, 8760h); at least Inbox.
	Evidence time.Duration `yaml:"evidence"`
	// Interval is how often a processor runs a purge pass (one processor
	// at a time across replicas). Defaults to DefaultPurgeInterval (10m).
	Interval time.Duration `yaml:"interval"`
	// BatchSize is the most rows one purge transaction deletes, which
	// bounds the locks it holds and how long a claim of the same key may
	// wait for it. Defaults to DefaultPurgeBatchSize (500).
	BatchSize int `yaml:"batch_size"`
	// Disabled turns the scheduled purge off (`intake purge` still runs).
	Disabled bool `yaml:"disabled"`
}

// Defaults of the retention section.
const (
	DefaultInboxRetention    = 90 * 24 * time.Hour
	DefaultEvidenceRetention = 365 * 24 * time.Hour
	DefaultPurgeInterval     = 10 * time.Minute
	DefaultPurgeBatchSize    = 500
	// MaxPurgeBatchSize keeps one purge transaction's key locks well
	// inside Postgres's shared lock table (max_locks_per_transaction ×
	// max_connections, 6,400 by default), beside the processors' own.
	MaxPurgeBatchSize = 2000
	// StreamMargin is how much longer than the stream the inbox keeps a
	// key at least: a key's clock is ingress's receipt time, a message's
	// the stream's, a little later.
	StreamMargin = time.Hour
)

// WithDefaults returns r with every unset field at its default.
func (r Retention) WithDefaults() Retention {
	setDefault(&r.Inbox, DefaultInboxRetention)
	setDefault(&r.History, r.Inbox)
	setDefault(&r.Evidence, max(DefaultEvidenceRetention, r.Inbox))
	setDefault(&r.Interval, DefaultPurgeInterval)
	setDefault(&r.BatchSize, DefaultPurgeBatchSize)
	return r
}

// Validate checks the section against the stream's max_age and the
// integrations' provider retry windows; errors name the YAML field.
func (r Retention) Validate(maxAge time.Duration, integrations []Integration) error {
	var p problems
	floor := maxAge + StreamMargin
	if r.Inbox < floor {
		p.add("retention.inbox", "must be at least nats.stream.max_age (%s) plus %s: a message INTAKE_IN still holds can come back "+
			"(re-drive, replay) and would be processed again once its key is purged; got %s", maxAge, StreamMargin, r.Inbox)
	}
	for i, in := range integrations {
		keep, field := r.Inbox, "retention.inbox"
		if in.InboxRetention > 0 {
			keep, field = in.InboxRetention, fmt.Sprintf("integrations[%d] (%s).inbox_retention", i, in.Name)
			if keep < floor {
				p.add(field, "must be at least nats.stream.max_age (%s) plus %s, got %s", maxAge, StreamMargin, keep)
			}
			if keep > r.Evidence {
				p.add(field, "must be at most retention.evidence (%s): failed and quarantined events are kept longest; got %s",
					r.Evidence, keep)
			}
		} else if in.InboxRetention < 0 {
			p.add(fmt.Sprintf("integrations[%d] (%s).inbox_retention", i, in.Name), "must be positive, got %s", in.InboxRetention)
			continue
		}
		if w, why := provider.RetryWindow(in.Provider); keep < w {
			p.add(field, "must be at least %s for integration %s: %s, and a retry of a purged key is processed again; got %s",
				w, in.Name, why, keep)
		}
	}
	if r.History <= 0 || r.History > r.Inbox {
		p.add("retention.history", "must be positive and at most retention.inbox (%s), got %s", r.Inbox, r.History)
	}
	if r.Evidence < r.Inbox {
		p.add("retention.evidence", "must be at least retention.inbox (%s): conflicts and failures are evidence, kept longest; got %s",
			r.Inbox, r.Evidence)
	}
	if r.Interval <= 0 {
		p.add("retention.interval", "must be positive, got %s", r.Interval)
	}
	if r.BatchSize < 1 || r.BatchSize > MaxPurgeBatchSize {
		p.add("retention.batch_size", "must be between 1 and %d, got %d", MaxPurgeBatchSize, r.BatchSize)
	}
	return p.err()
}

// InboxRetention is how long the inbox keeps integration's keys:
// integrations[].inbox_retention when set, else retention.inbox.
func (c *Config) InboxRetention(integration string) time.Duration {
	if in, ok := c.Integration(integration); ok && in.InboxRetention > 0 {
		return in.InboxRetention
	}
	return c.Retention.Inbox
}
