package telemetry

import "github.com/prometheus/client_golang/prometheus"

// DispatcherMetrics are the dispatcher's series (docs/destinations.md),
// each by destination.
type DispatcherMetrics struct {
	// Attempts counts delivery attempts by outcome (delivered, retry,
	// failed) and error class ("" when delivered).
	Attempts *prometheus.CounterVec // destination, outcome, class
	Latency  *prometheus.HistogramVec
	// Skipped counts messages the destination's consumer delivered whose
	// type its match leaves out: acked without a delivery.
	Skipped *prometheus.CounterVec
	// CircuitOpen is 1 while this dispatcher's breaker for the destination
	// is open; Paused 1 while an operator has it paused.
	CircuitOpen *prometheus.GaugeVec
	Paused      *prometheus.GaugeVec
	// Backlog is the messages waiting for the destination (not yet
	// delivered, or waiting out a retry), OldestAge the age of the oldest,
	// at this dispatcher's last look (aggregate with max).
	Backlog   *prometheus.GaugeVec
	OldestAge *prometheus.GaugeVec
	// LogDropped counts delivery log rows given up after Postgres refused
	// them for longer than the dispatcher keeps them.
	LogDropped prometheus.Counter
}

func newDispatcherMetrics() DispatcherMetrics {
	sub := func(name, help string) prometheus.GaugeOpts {
		return prometheus.GaugeOpts{Namespace: "intake", Subsystem: "dispatcher", Name: name, Help: help}
	}
	return DispatcherMetrics{
		Attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "dispatcher",
			Name: "attempts_total", Help: "Delivery attempts to HTTP destinations, by outcome (delivered, retry, failed) and error class (\"\" when delivered)."},
			[]string{"destination", "outcome", "class"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "intake", Subsystem: "dispatcher",
			Name: "attempt_seconds", Help: "Delivery attempt duration, request to the end of the (bounded) answer.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"destination"}),
		Skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "dispatcher",
			Name: "skipped_total", Help: "Messages whose event type the destination's match.types leaves out: acknowledged without a delivery."},
			[]string{"destination"}),
		CircuitOpen: prometheus.NewGaugeVec(sub("circuit_open", "1 while this dispatcher's circuit breaker for the destination is open (failures in a row; probing)."), []string{"destination"}),
		Paused:      prometheus.NewGaugeVec(sub("paused", "1 while an operator has the destination paused."), []string{"destination"}),
		Backlog: prometheus.NewGaugeVec(sub("backlog", "Messages waiting for the destination: not delivered yet, or waiting out a retry, at this dispatcher's last look (aggregate with max)."),
			[]string{"destination"}),
		OldestAge: prometheus.NewGaugeVec(sub("oldest_undelivered_age_seconds", "Age of the oldest message the destination has not had delivered (0 when none waits), at this dispatcher's last look (aggregate with max)."),
			[]string{"destination"}),
		LogDropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "intake", Subsystem: "dispatcher",
			Name: "log_dropped_total", Help: "Delivery log rows given up because Postgres refused them for longer than the dispatcher keeps them (the deliveries themselves went on)."}),
	}
}

func (d DispatcherMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{d.Attempts, d.Latency, d.Skipped, d.CircuitOpen, d.Paused, d.Backlog, d.OldestAge, d.LogDropped}
}
