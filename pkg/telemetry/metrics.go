package telemetry

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Roles selects the series a registry exports. A process registers the
// series of the roles it runs and no others: an ingress pod that exported
// the processor's series would report intake_processor_last_commit_timestamp_seconds
// 0 and trip a stall alert. The replayer registers its own series
// (replayer.Options.Registry); Replayer here adds what it shares with the
// processor (intake_postgres_server_changes_total).
type Roles struct {
	Ingress   bool
	Processor bool // with the outbox relay and the receipt folder
	Replayer  bool
	// Dispatcher pushes processed events to HTTP destinations.
	Dispatcher bool
}

// AllRoles is every role: `intake dev`, and the private registry a
// service builds when it is given none.
func AllRoles() Roles { return Roles{Ingress: true, Processor: true, Replayer: true, Dispatcher: true} }

// Metrics are the counters and histograms the roles update. Every field is
// set whatever the roles; only the selected roles' fields are registered,
// so a series of another role is updated nowhere and exported nowhere.
type Metrics struct {
	Registry *prometheus.Registry

	// Ingress.
	Received      *prometheus.CounterVec // integration
	Verified      *prometheus.CounterVec // integration (signature and timestamp passed)
	Handshakes    *prometheus.CounterVec // integration (verified handshakes answered, not published)
	Rejected      *prometheus.CounterVec // integration, reason
	Accepted      *prometheus.CounterVec // integration
	Duplicates    *prometheus.CounterVec // integration (stopped by the stream window)
	SecretMatched *prometheus.CounterVec // integration, index
	// WeakAlgorithm is 1 for each integration configured with a weak hash
	// (hmac or pairs algorithm sha1): integration, algorithm.
	WeakAlgorithm  *prometheus.GaugeVec
	PublishLatency *prometheus.HistogramVec // integration
	RequestLatency *prometheus.HistogramVec // integration, code

	// Processor.
	Processed *prometheus.CounterVec // integration, outcome (inbox.Outcome: new, duplicate, redelivered, conflict, stale, replayed, retried, reexecuted)
	Conflicts *prometheus.CounterVec // integration
	Failures  *prometheus.CounterVec // integration, kind, handler (a SQL handler's name from the config, else "")
	// ProcessorRejected counts messages refused before the inbox decision
	// (intake.rejected_messages): integration ("" when not configured, so a
	// publisher cannot mint label values), reason.
	ProcessorRejected *prometheus.CounterVec
	// UnsignedEnvelopes counts messages applied without an
	// Intake-Envelope-Signature because envelope.require is false (a
	// rolling upgrade): integration. At 0 for a while, require can go on.
	UnsignedEnvelopes *prometheus.CounterVec
	TxLatency         prometheus.Histogram // one inbox transaction
	// LastCommit is when the processor last committed a batch (Unix
	// seconds): a stall shows as time() minus it while INTAKE_IN has a
	// backlog, and a benchmark reads a drain's length from it without
	// scraping every few milliseconds.
	LastCommit prometheus.Gauge
	// HandlerLatency times domain handler runs: integration, result.
	HandlerLatency *prometheus.HistogramVec
	// AckPending and MaxAckPending are the processor consumer's messages
	// delivered and not yet acked (by every replica together) and its
	// window, at a processor's last look (every few seconds); every
	// replica reports the same consumer, so aggregate with max, not sum.
	AckPending    prometheus.Gauge
	MaxAckPending prometheus.Gauge
	// ConsumerPending and ConsumerRedelivered are the processor consumer's
	// num_pending (in the stream, not yet delivered) and num_redelivered
	// (delivered more than once and not yet acked), at the same look.
	ConsumerPending     prometheus.Gauge
	ConsumerRedelivered prometheus.Gauge
	// OldestUnprocessedAge is the age of the oldest message the processor
	// consumer has not had acked (the first after its ack floor), 0 when
	// none waits, at the same look: the oldest of a backlog, or an event
	// waiting out its retry backoff (NAK-delayed, it holds the ack floor).
	OldestUnprocessedAge prometheus.Gauge
	// FailureDelivery observes the delivery number of each handler
	// failure (1 for the first attempt), by integration: failures at the
	// fifth delivery or later are an event failing again and again.
	FailureDelivery *prometheus.HistogramVec
	// UncoveredMessages is, by integration, the messages of INTAKE_IN that
	// no processors' durable ("processor", "processor-{shard}") filters on,
	// at this processor's last look (every minute; absent when none): in a
	// sharded deployment, an integration no shard's config lists. Every
	// processor reports the whole stream: aggregate with max.
	UncoveredMessages *prometheus.GaugeVec // integration
	// WindowFull counts the looks that found the window full while
	// messages waited in the stream: processors wait for acks, and more
	// replicas would add nothing until processor.max_ack_pending grows.
	WindowFull prometheus.Counter
	// ReceiptsFolded counts receipts folded into the delivery history.
	ReceiptsFolded prometheus.Counter
	// ReceiptsRefused counts receipts the database refused for good (a
	// value a column cannot hold): split out of their batch and terminated.
	ReceiptsRefused prometheus.Counter

	// Purge (processor/purge.go, docs/retention.md): rows removed past
	// retention by table; scheduled passes by result (done, busy,
	// failed); when this processor last finished one; how long passes
	// took; and, read after each pass it ran, each table's oldest row
	// (tables with a btree on their time column), how far past its
	// retention the oldest row that should be gone is, and its size.
	PurgeRows          *prometheus.CounterVec // table
	PurgePasses        *prometheus.CounterVec // result
	PurgeLastDone      prometheus.Gauge
	PurgePassSeconds   prometheus.Histogram
	RetentionOldest    *prometheus.GaugeVec // table
	RetentionOverdue   *prometheus.GaugeVec // table
	RetentionTableSize *prometheus.GaugeVec // table

	// Outbox relay.
	OutboxPublished prometheus.Counter
	OutboxRelayed   prometheus.Counter
	// OutboxPayloadGone counts relay attempts at rows whose payload
	// INTAKE_IN no longer holds (the row stays pending).
	OutboxPayloadGone prometheus.Counter
	// OutboxMarkSkipped counts published rows the processor left pending
	// because its marker was behind (its queue full, or Postgres away
	// past what it keeps): the relay publishes them again under the same
	// Nats-Msg-Id, which INTAKE_OUT drops. Growing, it says the marking
	// does not keep up.
	OutboxMarkSkipped prometheus.Counter
	OutboxPending     prometheus.Gauge
	OutboxLag         prometheus.Gauge // seconds, oldest unpublished row
	// OutboxPartitionsAhead is how far ahead of now the outbox's last
	// partition ends: an insert past it fails (IntakeOutboxPartitionsShort).
	OutboxPartitionsAhead prometheus.Gauge

	// PostgresServerChanges counts changes of the Postgres server behind a
	// role's pool (store.ServerWatcher): a failover, a promotion, a restart.
	PostgresServerChanges prometheus.Counter

	// Dispatch are the dispatcher's (HTTP destinations).
	Dispatch DispatcherMetrics
}

// NewPostgresServerChanges is Metrics.PostgresServerChanges, for a role
// that registers its metrics itself (the replayer): the same name and help,
// so the two share one collector on a shared registry.
func NewPostgresServerChanges() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "intake", Name: "postgres_server_changes_total",
		Help: "Changes of the Postgres server behind the pool (failover, restart, promotion) seen by the server watcher."})
}

// NewMetrics builds every role's metrics on a fresh registry (NewMetricsFor
// with AllRoles).
func NewMetrics() *Metrics { return NewMetricsFor(AllRoles()) }

// NewMetricsFor builds the metrics and registers, on a fresh registry, the
// Go and process collectors and the series of roles only.
func NewMetricsFor(roles Roles) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	lat := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	m := &Metrics{
		Registry: reg,
		Received: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "ingress",
			Name: "received_total", Help: "Webhook requests received, by integration (unknown integrations are \"\")."}, []string{"integration"}),
		Verified: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "ingress",
			Name: "verified_total", Help: "Requests whose signature and timestamp verified, before id checks and publishing."}, []string{"integration"}),
		Handshakes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "ingress",
			Name: "handshakes_total", Help: "Verified provider handshakes (Slack url_verification) answered and not published."}, []string{"integration"}),
		Rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "ingress",
			Name: "rejected_total", Help: "Requests rejected before publishing, by reason."}, []string{"integration", "reason"}),
		Accepted: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "ingress",
			Name: "accepted_total", Help: "Deliveries persisted in INTAKE_IN (PubAck received)."}, []string{"integration"}),
		Duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "ingress",
			Name: "duplicates_total", Help: "Deliveries the JetStream duplicate window stopped."}, []string{"integration"}),
		SecretMatched: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "ingress",
			Name: "secret_matched_total", Help: "Verified deliveries by index of the secret that matched: when an old index stops growing, that secret can go."}, []string{"integration", "index"}),
		WeakAlgorithm: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "ingress",
			Name: "weak_algorithm", Help: "1 for each integration that verifies with a weak hash (algorithm sha1), by algorithm: move it to sha256 when the sender offers it."}, []string{"integration", "algorithm"}),
		PublishLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "intake", Subsystem: "ingress",
			Name: "publish_seconds", Help: "JetStream publish until PubAck.", Buckets: lat}, []string{"integration"}),
		RequestLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "intake", Subsystem: "ingress",
			Name: "request_seconds", Help: "Webhook request duration.", Buckets: lat}, []string{"integration", "code"}),
		Processed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "processor",
			Name: "messages_total", Help: "Messages committed by the processor, by inbox outcome (new, duplicate, redelivered, conflict, stale, replayed, retried, reexecuted)."}, []string{"integration", "outcome"}),
		Conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "processor",
			Name: "conflicts_total", Help: "Same-id-different-payload deliveries recorded."}, []string{"integration"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "processor",
			Name: "failures_total", Help: "Processing failures, by kind (retry: the handler failed and the message will be redelivered; failed, quarantined: recorded so for good; db; malformed) and handler (the SQL handler's name from the config; \"\" for a Go handler, Forward, or no handler)."}, []string{"integration", "kind", "handler"}),
		ProcessorRejected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "processor",
			Name: "rejected_total", Help: "Messages refused before the inbox decision (recorded in intake.rejected_messages, terminated), by reason; integration \"\" when not configured."}, []string{"integration", "reason"}),
		UnsignedEnvelopes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "processor",
			Name: "unsigned_envelopes_total", Help: "Messages applied without an Intake-Envelope-Signature because envelope.require is false (a rolling upgrade), by integration."}, []string{"integration"}),
		TxLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "intake", Subsystem: "processor",
			Name: "tx_seconds", Help: "Inbox transaction duration.", Buckets: lat}),
		LastCommit: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "processor",
			Name: "last_commit_timestamp_seconds", Help: "When the processor last committed a batch (Unix time)."}),
		HandlerLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "intake", Subsystem: "processor",
			Name: "handler_seconds", Help: "Domain handler duration.", Buckets: lat}, []string{"integration", "result"}),
		AckPending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "processor",
			Name: "ack_pending", Help: "Messages the processor consumer has delivered and not yet had acked, all replicas together, at this processor's last look (aggregate with max)."}),
		MaxAckPending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "processor",
			Name: "max_ack_pending", Help: "The processor consumer's in-flight window (processor.max_ack_pending as the consumer has it), at this processor's last look."}),
		ConsumerPending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "processor",
			Name: "consumer_pending", Help: "Messages in INTAKE_IN the processor consumer has not delivered yet (num_pending), at this processor's last look (aggregate with max)."}),
		ConsumerRedelivered: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "processor",
			Name: "consumer_redelivered", Help: "Messages the processor consumer delivered more than once and not yet had acked (num_redelivered), at this processor's last look (aggregate with max)."}),
		OldestUnprocessedAge: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "processor",
			Name: "oldest_unprocessed_age_seconds", Help: "Age of the oldest unacknowledged message of the processor consumer in INTAKE_IN (0 when none waits): the oldest of a backlog, or an event waiting out its retry backoff; at this processor's last look (aggregate with max)."}),
		FailureDelivery: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "intake", Subsystem: "processor",
			Name: "failure_delivery", Help: "Handler failures by the delivery they happened on (1: first attempt); count minus the le=\"4\" bucket is failures on the fifth delivery or later.",
			Buckets: []float64{1, 2, 3, 4, 5, 10, 20}}, []string{"integration"}),
		UncoveredMessages: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "processor",
			Name: "uncovered_messages", Help: "Messages of INTAKE_IN, by integration, that no processors' durable filters on (an integration no shard's config lists: nothing processes them), at this processor's last look, every minute (aggregate with max)."}, []string{"integration"}),
		WindowFull: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "intake", Subsystem: "processor",
			Name: "window_full_total", Help: "Looks (every few seconds) that found the consumer's in-flight window full while messages waited in the stream: processors wait for acks; raise processor.max_ack_pending."}),
		ReceiptsFolded: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "intake", Subsystem: "processor",
			Name: "receipts_folded_total", Help: "Delivery receipts folded into the delivery history."}),
		ReceiptsRefused: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "intake", Subsystem: "processor",
			Name: "receipts_refused_total", Help: "Delivery receipts the database refused for good (a value it cannot store): split out of their batch, logged and terminated."}),
		PurgeRows: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "purge",
			Name: "rows_total", Help: "Rows the purge removed past their retention, by table."}, []string{"table"}),
		PurgePasses: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "purge",
			Name: "passes_total", Help: "Scheduled purge passes by result: done (everything past retention removed), busy (another runner held the lock), failed."}, []string{"result"}),
		PurgeLastDone: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "purge",
			Name: "last_done_timestamp_seconds", Help: "When a purge pass by this processor last removed everything past retention (Unix time; 0 before the first)."}),
		PurgePassSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "intake", Subsystem: "purge",
			Name: "pass_seconds", Help: "Duration of purge passes that held the lock.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)}),
		RetentionOldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "retention",
			Name: "oldest_seconds", Help: "Age of the oldest row kept, by table, after this processor's last purge pass (absent while the table is empty)."}, []string{"table"}),
		RetentionOverdue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "retention",
			Name: "overdue_seconds", Help: "How far past its retention the oldest row the purge should have removed is, by table, after this processor's last pass: 0 while the purge keeps up."}, []string{"table"}),
		RetentionTableSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "retention",
			Name: "table_bytes", Help: "Size of each purged table with its indexes and TOAST, after this processor's last purge pass."}, []string{"table"}),
		OutboxMarkSkipped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "intake", Subsystem: "outbox",
			Name: "mark_skipped_total", Help: "Published outbox rows the processor left pending because marking them was behind (the relay publishes them again; INTAKE_OUT drops the copy)."}),
		OutboxPublished: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "intake", Subsystem: "outbox",
			Name: "published_total", Help: "Outbox rows published to INTAKE_OUT."}),
		OutboxRelayed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "intake", Subsystem: "outbox",
			Name: "relayed_total", Help: "Outbox rows the relay published because no processor had (a processor died or lost NATS after its commit); part of published_total."}),
		OutboxPayloadGone: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "intake", Subsystem: "outbox",
			Name: "payload_gone_total", Help: "Relay attempts at outbox rows whose payload INTAKE_IN no longer holds (past nats.stream.max_age, deleted, the stream made again): each stays pending, unpublished, until the stream has it again."}),
		OutboxPending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "outbox",
			Name: "pending", Help: "Unpublished outbox rows at the last relay pass."}),
		OutboxLag: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "outbox",
			Name: "lag_seconds", Help: "Age of the oldest unpublished outbox row at the last relay pass."}),
		OutboxPartitionsAhead: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "outbox",
			Name: "partitions_ahead_seconds", Help: "How far ahead of now the outbox's last daily partition ends, at this processor's last look (every minute): an outbox row created past it cannot be written."}),
		PostgresServerChanges: NewPostgresServerChanges(),
		Dispatch:              newDispatcherMetrics(),
	}
	for _, c := range m.collectors(roles) {
		reg.MustRegister(c)
	}
	// IntakePurgeFailing takes an increase() of the failed passes: a
	// series that first appeared at 1 would hide the first failure.
	for _, result := range []string{"done", "busy", "failed"} {
		m.PurgePasses.WithLabelValues(result)
	}
	return m
}

// collectors are the series of roles.
func (m *Metrics) collectors(roles Roles) []prometheus.Collector {
	var cs []prometheus.Collector
	if roles.Ingress {
		cs = append(cs, m.Received, m.Verified, m.Handshakes, m.Rejected, m.Accepted, m.Duplicates, m.SecretMatched,
			m.WeakAlgorithm, m.PublishLatency, m.RequestLatency)
	}
	if roles.Processor {
		cs = append(cs, m.Processed, m.Conflicts, m.Failures, m.ProcessorRejected, m.UnsignedEnvelopes, m.TxLatency, m.LastCommit, m.HandlerLatency,
			m.AckPending, m.MaxAckPending, m.ConsumerPending, m.ConsumerRedelivered, m.OldestUnprocessedAge, m.FailureDelivery,
			m.UncoveredMessages, m.WindowFull, m.ReceiptsFolded, m.ReceiptsRefused,
			m.OutboxPublished, m.OutboxRelayed, m.OutboxPayloadGone, m.OutboxMarkSkipped, m.OutboxPending, m.OutboxLag, m.OutboxPartitionsAhead,
			m.PurgeRows, m.PurgePasses, m.PurgeLastDone, m.PurgePassSeconds, m.RetentionOldest, m.RetentionOverdue, m.RetentionTableSize)
	}
	if roles.Dispatcher {
		cs = append(cs, m.Dispatch.collectors()...)
	}
	if roles.Processor || roles.Replayer {
		// The roles with a Postgres pool.
		cs = append(cs, m.PostgresServerChanges)
	}
	return cs
}

// Handler serves /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}
