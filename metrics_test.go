package intake_test

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/scrape"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
)

// seriesOwners are the name prefixes of each role's series; shared ones
// (NATS, Go, process) belong to every role, Postgres ones to the roles with
// a pool. docs/observability.md has the same table.
var seriesOwners = map[string][]string{
	"ingress":   {"intake_ingress_"},
	"processor": {"intake_processor_", "intake_outbox_", "intake_postgres_", "intake_purge_", "intake_retention_"},
	"replayer": {"intake_replayer_", "intake_replays", "intake_inbox_", "intake_api_", "intake_stream_",
		"intake_redrive", "intake_postgres_"},
	"shared": {"intake_nats_", "go_", "process_", "promhttp_"},
}

// TestEachRoleExportsItsOwnSeries starts each role as its `intake` command
// does (app.Run with its Roles, metrics by app.NewMetrics) and scrapes
// /metrics: every series is the role's or shared, and the role's own are
// there. An ingress pod must not report intake_processor_last_commit_timestamp_seconds
// 0 (a stall alert would fire), nor a processor the replayer's counts.
func TestEachRoleExportsItsOwnSeries(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		roles intake.Roles
		owns  []string // seriesOwners keys
		want  []string // series that must be there
	}{
		{"ingress", intake.Roles{Ingress: true}, []string{"ingress"},
			[]string{"intake_ingress_received_total", "intake_nats_connected", "intake_nats_reconnects_total"}},
		{"processor", intake.Roles{Processor: true}, []string{"processor"},
			[]string{"intake_processor_last_commit_timestamp_seconds", "intake_outbox_pending", "intake_postgres_pool_max_conns",
				"intake_postgres_server_changes_total", "intake_nats_connected"}},
		{"replayer", intake.Roles{Replayer: true}, []string{"replayer"},
			[]string{"intake_replayer_running", "intake_replays", "intake_inbox_events", "intake_postgres_pool_max_conns",
				"intake_postgres_server_changes_total", "intake_nats_connected"}},
		{"dev", intake.Roles{Ingress: true, Processor: true, Replayer: true}, []string{"ingress", "processor", "replayer"},
			[]string{"intake_ingress_received_total", "intake_processor_last_commit_timestamp_seconds", "intake_replays"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := testrig.New(t, testrig.Options{Config: testConfig, App: &intake.Options{Roles: tt.roles}})
			allowed := slices.Clone(seriesOwners["shared"])
			for _, o := range tt.owns {
				allowed = append(allowed, seriesOwners[o]...)
			}
			var names []string
			var fams map[string]*dto.MetricFamily
			testenv.Eventually(t, 30*time.Second, func() bool {
				var err error
				fams, err = scrape.Families(context.Background(), tr.App.URL+"/metrics")
				if err != nil {
					t.Logf("scrape: %v", err)
					return false
				}
				names = names[:0]
				for name := range fams {
					names = append(names, name)
				}
				for _, w := range tt.want {
					if _, ok := fams[w]; !ok {
						return false // the replayer's first stats pass may be on its way
					}
				}
				return true
			}, "the role's own series")
			sort.Strings(names)
			for _, name := range names {
				if !slices.ContainsFunc(allowed, func(p string) bool { return strings.HasPrefix(name, p) }) {
					t.Errorf("%s exports %s: not its series", tt.name, name)
				}
			}
			for _, w := range tt.want {
				if !slices.Contains(names, w) {
					t.Errorf("%s does not export %s; it exports %v", tt.name, w, names)
				}
			}
			if v, _ := scrape.Sum(fams, "intake_nats_connected", nil); v != 1 {
				t.Errorf("intake_nats_connected = %v, want 1", v)
			}
			if tt.roles.Processor || tt.roles.Replayer {
				if v, _ := scrape.Sum(fams, "intake_postgres_pool_max_conns", nil); v != float64(tr.Config.Postgres.MaxConns) {
					t.Errorf("intake_postgres_pool_max_conns = %v, want postgres.max_conns (%d)", v, tr.Config.Postgres.MaxConns)
				}
			}
		})
	}
}
