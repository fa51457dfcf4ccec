package telemetry_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/pkg/telemetry"
)

// TestPurgePassResultsStartAtZero: IntakePurgeFailing takes an increase()
// of the failed passes, which sees a first failure only if the series was
// there at 0 before it; a role without the purge exports none.
func TestPurgePassResultsStartAtZero(t *testing.T) {
	const want = `
# HELP intake_purge_passes_total Scheduled purge passes by result: done (everything past retention removed), busy (another runner held the lock), failed.
# TYPE intake_purge_passes_total counter
intake_purge_passes_total{result="busy"} 0
intake_purge_passes_total{result="done"} 0
intake_purge_passes_total{result="failed"} 0
`
	m := telemetry.NewMetricsFor(telemetry.Roles{Processor: true})
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "intake_purge_passes_total"); err != nil {
		t.Error(err)
	}
	m = telemetry.NewMetricsFor(telemetry.Roles{Ingress: true})
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(""), "intake_purge_passes_total"); err != nil {
		t.Error(err)
	}
}
