package store

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// PoolCollector exports a pgx pool's statistics (pgxpool.Stat), read at
// each scrape: every role with a Postgres pool registers one.
type PoolCollector struct {
	stat func() *pgxpool.Stat

	acquired, idle, total, max, constructing *prometheus.Desc
	acquires, acquireSeconds, emptyAcquires  *prometheus.Desc
	canceledAcquires, emptyAcquireWait       *prometheus.Desc
}

// NewPoolCollector is a PoolCollector over pool (Store.Pool).
func NewPoolCollector(pool *pgxpool.Pool) *PoolCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("intake", "postgres_pool", name), help, nil, nil)
	}
	return &PoolCollector{stat: pool.Stat,
		acquired:         d("acquired_conns", "Connections of the pool in use."),
		idle:             d("idle_conns", "Idle connections of the pool."),
		total:            d("total_conns", "Connections of the pool, in use, idle and being opened."),
		max:              d("max_conns", "The pool's maximum size (postgres.max_conns)."),
		constructing:     d("constructing_conns", "Connections of the pool being opened."),
		acquires:         d("acquires_total", "Connections acquired from the pool."),
		acquireSeconds:   d("acquire_seconds_total", "Time spent acquiring connections (rate over acquires_total rate: the mean wait)."),
		emptyAcquires:    d("empty_acquires_total", "Acquires that found no idle connection and waited for one (or for a new one): the pool is too small or the database slow."),
		canceledAcquires: d("canceled_acquires_total", "Acquires given up (their context ended) before a connection came."),
		emptyAcquireWait: d("empty_acquire_wait_seconds_total", "Time spent by acquires that found the pool empty."),
	}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.acquired, c.idle, c.total, c.max, c.constructing,
		c.acquires, c.acquireSeconds, c.emptyAcquires, c.canceledAcquires, c.emptyAcquireWait} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stat()
	g := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	n := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	g(c.acquired, float64(s.AcquiredConns()))
	g(c.idle, float64(s.IdleConns()))
	g(c.total, float64(s.TotalConns()))
	g(c.max, float64(s.MaxConns()))
	g(c.constructing, float64(s.ConstructingConns()))
	n(c.acquires, float64(s.AcquireCount()))
	n(c.acquireSeconds, s.AcquireDuration().Seconds())
	n(c.emptyAcquires, float64(s.EmptyAcquireCount()))
	n(c.canceledAcquires, float64(s.CanceledAcquireCount()))
	n(c.emptyAcquireWait, s.EmptyAcquireWaitTime().Seconds())
}
