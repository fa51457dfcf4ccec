// Package observability tests what deploy/observability ships (no code of
// its own): promtool checks and unit-tests the alert rules, the
// PrometheusRule carries the same rules, and every metric the dashboard,
// the rules and docs/observability.md name is one a role exports, each
// exported metric having its row in docs/observability.md.
package observability
