package telemetry

import (
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// NATSCollector exports a NATS connection's state, read at each scrape:
// every role registers one for its connection.
type NATSCollector struct {
	nc                    *nats.Conn
	connected, reconnects *prometheus.Desc
}

// NewNATSCollector is a NATSCollector over nc.
func NewNATSCollector(nc *nats.Conn) *NATSCollector {
	return &NATSCollector{nc: nc,
		connected: prometheus.NewDesc("intake_nats_connected",
			"1 while the role's NATS connection is connected, else 0 (reconnecting, closed).", nil, nil),
		reconnects: prometheus.NewDesc("intake_nats_reconnects_total",
			"Reconnects of the role's NATS connection.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *NATSCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.connected
	ch <- c.reconnects
}

// Collect implements prometheus.Collector.
func (c *NATSCollector) Collect(ch chan<- prometheus.Metric) {
	connected := 0.0
	if c.nc.Status() == nats.CONNECTED {
		connected = 1
	}
	ch <- prometheus.MustNewConstMetric(c.connected, prometheus.GaugeValue, connected)
	ch <- prometheus.MustNewConstMetric(c.reconnects, prometheus.CounterValue, float64(c.nc.Stats().Reconnects))
}
