// Package observability holds Intake's Grafana dashboard
// (intake-pipeline.json) and Prometheus alert rules
// (prometheus-rules.yaml, and prometheusrule.yaml for the Prometheus
// Operator); no code. Its tests run promtool over the rules and check that
// every metric the dashboard, the rules and docs/observability.md name is
// one a role exports.
package observability
