package intake

import (
	"reflect"
	"testing"
	"time"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/replayer"
)

// knobs keeps the Options the config file sets, without what New adds.
func knobs(o replayer.Options) replayer.Options {
	return replayer.Options{DefaultRate: o.DefaultRate, MaxRate: o.MaxRate, MaxMatched: o.MaxMatched, MaxRunning: o.MaxRunning,
		ResumeInterval: o.ResumeInterval, PublishTimeout: o.PublishTimeout, RetryFor: o.RetryFor,
		ReconcileMaxSpan: o.ReconcileMaxSpan, ReconcileViewerMaxSpan: o.ReconcileViewerMaxSpan, MaxReconciles: o.MaxReconciles,
		StatsInterval: o.StatsInterval, GapCheckInterval: o.GapCheckInterval,
		RedriveInterval: o.RedriveInterval, RedriveLookback: o.RedriveLookback}
}

// TestReplayerOptionsTakeTheConfig: every api key reaches the replayer's
// Options, and a config file without them gives the replayer exactly the
// defaults a program's empty Options get.
func TestReplayerOptionsTakeTheConfig(t *testing.T) {
	def := config.Config{}.WithDefaults()
	if got, want := knobs(replayerOptions(&def)), knobs(replayer.Options{}.WithDefaults()); !reflect.DeepEqual(got, want) {
		t.Errorf("from the defaulted config:\n%+v\nwant Options' own defaults:\n%+v", got, want)
	}

	cfg, err := config.Parse([]byte(`
api:
  redrive_interval: 2m
  redrive_lookback: 20m
  stats_interval: 45s
  gap_check_interval: 7m
  replays: {default_rate: 50, max_rate: 500, max_matched: 5000, max_running: 3, resume_interval: 3s, publish_timeout: 4s, retry_for: 5m}
  reconcile: {max_span: 2000, viewer_max_span: 200, max_running: 4}
processor: {shard: eu}
integrations:
  - {name: demo, provider: standard, tenant: acme, secrets: ["whsec_b3duLXNlY3JldC1vZi1vdXItb3du"]}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	got := replayerOptions(cfg)
	want := replayer.Options{DefaultRate: 50, MaxRate: 500, MaxMatched: 5000, MaxRunning: 3,
		ResumeInterval: 3 * time.Second, PublishTimeout: 4 * time.Second, RetryFor: 5 * time.Minute,
		ReconcileMaxSpan: 2000, ReconcileViewerMaxSpan: 200, MaxReconciles: 4,
		StatsInterval: 45 * time.Second, GapCheckInterval: 7 * time.Minute,
		RedriveInterval: 2 * time.Minute, RedriveLookback: 20 * time.Minute}
	if !reflect.DeepEqual(knobs(got), want) {
		t.Errorf("replayerOptions:\n%+v\nwant\n%+v", knobs(got), want)
	}
	if got.Shard != "eu" || !reflect.DeepEqual(got.Integrations, []string{"demo"}) {
		t.Errorf("shard %q, integrations %v; want eu, [demo]", got.Shard, got.Integrations)
	}
}
