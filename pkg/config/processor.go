package config

import (
	"fmt"
	"regexp"
	"time"
)

// Processor configures the consumer of INTAKE_IN.
type Processor struct {
	// AckWait is the ack deadline of the durable consumer. Defaults to
	// DefaultAckWait (30s). Batches that take longer than a third of it send
	// InProgress.
	AckWait time.Duration `yaml:"ack_wait"`
	// MaxDeliver bounds deliveries of one message. Defaults to
	// DefaultMaxDeliver (10).
	MaxDeliver int `yaml:"max_deliver"`
	// BatchSize is the most messages one transaction commits. Defaults to
	// DefaultBatchSize (256); at most MaxBatchSize.
	BatchSize int `yaml:"batch_size"`
	// BatchWait is how long a batch collects after its first message: the
	// latency a message may gain for group commit. Defaults to
	// DefaultBatchWait (20ms); at most a tenth of AckWait.
	BatchWait time.Duration `yaml:"batch_wait"`
	// Concurrency is the number of batches in flight. Defaults to
	// DefaultConcurrency (2).
	Concurrency int `yaml:"concurrency"`
	// Backoff is the wait before redelivery after a handler error, per
	// delivery; the last value repeats. Defaults to DefaultBackoff()
	// (1s, 5s, 30s, 2m, 10m).
	Backoff []time.Duration `yaml:"backoff"`
	// MaxAckPending is the in-flight window of the durable consumer that
	// every processor shares: messages delivered and not yet acked, by all
	// replicas together. A processor waits while it is full, so it must fit
	// every replica's batches. Defaults to Replicas × Holds() (2 × 1,280 =
	// 2,560 with the other defaults); at least BatchSize × Concurrency.
	MaxAckPending int `yaml:"max_ack_pending"`
	// Replicas is the number of processors expected to share the consumer.
	// It only sizes MaxAckPending's default. Defaults to DefaultProcessorReplicas (2).
	Replicas int `yaml:"replicas"`
	// Shard, when set, makes this processor deployment one shard of a
	// deployment split across Postgres clusters by integration: it consumes
	// through durables of its own, "processor-{shard}" and
	// "receipts-{shard}", only the subjects of the integrations its config
	// lists. The shard's replayer (the api role with the same config)
	// reconciles and re-drives against "processor-{shard}" and answers for
	// those integrations only. Empty (the default): the durables
	// "processor" and "receipts", every integration. See docs/scaling.md.
	Shard string `yaml:"shard"`
}

// Defaults and limits of the processor section.
const (
	DefaultAckWait     = 30 * time.Second
	DefaultMaxDeliver  = 10
	DefaultBatchSize   = 256
	DefaultBatchWait   = 20 * time.Millisecond
	DefaultConcurrency = 2
	// DefaultProcessorReplicas is processor.replicas when unset: the smallest
	// deployment that keeps consuming while one pod restarts.
	DefaultProcessorReplicas = 2
	// MinAckWait is the shortest processor.ack_wait accepted.
	MinAckWait = time.Second
	// MaxBatchSize is the largest processor.batch_size accepted.
	MaxBatchSize = 4096
)

// shardName is what a durable name may carry after "processor-".
var shardName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// DefaultBackoff is processor.backoff when unset: the redelivery delays
// after handler errors. A function, so no caller can change the default.
func DefaultBackoff() []time.Duration {
	return []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}
}

// WithDefaults returns p with every unset field at its default.
func (p Processor) WithDefaults() Processor {
	setDefault(&p.AckWait, DefaultAckWait)
	setDefault(&p.MaxDeliver, DefaultMaxDeliver)
	setDefault(&p.BatchSize, DefaultBatchSize)
	setDefault(&p.BatchWait, DefaultBatchWait)
	setDefault(&p.Concurrency, DefaultConcurrency)
	if len(p.Backoff) == 0 {
		p.Backoff = DefaultBackoff()
	}
	setDefault(&p.Replicas, DefaultProcessorReplicas)
	setDefault(&p.MaxAckPending, p.Replicas*p.Holds())
	return p
}

// Holds is the most messages one processor keeps delivered and unacked:
// Concurrency batches in their transactions, one batch collecting, and a
// client prefetch buffer of BatchSize × Concurrency — BatchSize × (2 ×
// Concurrency + 1). MaxAckPending's default is Replicas × Holds().
func (p Processor) Holds() int { return p.BatchSize * (2*p.Concurrency + 1) }

// ReceiptBatch is the most receipts one fold commits.
const ReceiptBatch = 500

// ReceiptsMaxAckPending is the in-flight window of the receipts consumer
// the processors share: Replicas × 4 × ReceiptBatch — each folder holds
// one batch folding, one collecting and a prefetch buffer of two.
func (p Processor) ReceiptsMaxAckPending() int { return p.Replicas * 4 * ReceiptBatch }

// Validate checks the section; errors name the YAML field.
func (p Processor) Validate() error {
	var errs problems
	if p.AckWait < MinAckWait {
		errs.add("processor.ack_wait", "must be at least %s, got %s", MinAckWait, p.AckWait)
	}
	if p.MaxDeliver < 1 {
		errs.add("processor.max_deliver", "must be at least 1, got %d", p.MaxDeliver)
	}
	if p.Concurrency < 1 {
		errs.add("processor.concurrency", "must be at least 1, got %d", p.Concurrency)
	}
	if p.BatchSize < 1 || p.BatchSize > MaxBatchSize {
		errs.add("processor.batch_size", "must be 1..%d, got %d", MaxBatchSize, p.BatchSize)
	}
	if p.BatchWait < 0 || p.BatchWait*10 > p.AckWait {
		errs.add("processor.batch_wait", "must be positive and at most a tenth of processor.ack_wait, got %s", p.BatchWait)
	}
	if p.Replicas < 1 {
		errs.add("processor.replicas", "must be at least 1, got %d", p.Replicas)
	}
	// Below one processor's batches the consumer never delivers a full
	// round of batches: a stall that looks like a slow database.
	if p.BatchSize >= 1 && p.Concurrency >= 1 && p.MaxAckPending < p.BatchSize*p.Concurrency {
		errs.add("processor.max_ack_pending", "must be at least processor.batch_size × processor.concurrency (%d × %d = %d), "+
			"the batches one processor has in flight, got %d (unset, it is processor.replicas × batch_size × (2 × concurrency + 1))",
			p.BatchSize, p.Concurrency, p.BatchSize*p.Concurrency, p.MaxAckPending)
	}
	if p.Shard != "" && !shardName.MatchString(p.Shard) {
		errs.add("processor.shard", "must be letters, digits, - and _ (it names NATS durables), got %q", p.Shard)
	}
	for i, d := range p.Backoff {
		if d <= 0 {
			errs.add(fmt.Sprintf("processor.backoff[%d]", i), "must be positive, got %s", d)
		}
	}
	return errs.err()
}
