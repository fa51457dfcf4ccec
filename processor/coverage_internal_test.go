package processor

import (
	"maps"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/pkg/telemetry"
)

func TestUncovered(t *testing.T) {
	subjects := map[string]uint64{
		"intake.in.a.invoice.paid": 3, "intake.in.a.x": 1,
		"intake.in.b.push":  2,
		"intake.in.stray.y": 4, "intake.in.stray.z": 1,
		"intake.in.gone.y": 0,
	}
	for _, tt := range []struct {
		name    string
		filters []string
		want    map[string]uint64
	}{
		{"no durable", nil, map[string]uint64{"a": 4, "b": 2, "stray": 5}},
		{"two shards", []string{"intake.in.a.>", "intake.in.b.>"}, map[string]uint64{"stray": 5}},
		{"the unsharded durable", []string{envelope.SubjectInAll}, map[string]uint64{}},
		{"one event type only", []string{"intake.in.a.invoice.*", "intake.in.b.>", "intake.in.stray.>"}, map[string]uint64{"a": 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := uncovered(subjects, tt.filters); !maps.Equal(got, tt.want) {
				t.Errorf("uncovered = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCoverageLook: on a real INTAKE_IN with two shards' durables, a look
// reports the messages of the integration neither takes (a replayer scan
// consumer on it does not count), and drops the series once a shard takes it.
func TestCoverageLook(t *testing.T) {
	ns := testenv.NATS(t)
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := stream.Ensure(ctx, js, config.Stream{}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	for _, integration := range []string{"a", "b", "stray", "a", "stray"} {
		if _, err := js.Publish(ctx, envelope.SubjectIn(integration, "test.event"), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	for shard, integration := range map[string]string{"s1": "a", "s2": "b"} {
		if _, err := stream.EnsureProcessorConsumer(ctx, js, config.Processor{Shard: shard}, integration); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.CreateConsumer(ctx, envelope.StreamIn, jetstream.ConsumerConfig{Name: "replayer-scan-0",
		AckPolicy: jetstream.AckNonePolicy, FilterSubjects: []string{"intake.in.stray.>", "intake.in.a.>"}}); err != nil {
		t.Fatal(err)
	}
	m := telemetry.NewMetrics()
	w := &coverageWatch{js: js, metrics: m, log: telemetry.Discard(), logged: map[string]struct{}{}}
	w.look(ctx)
	if n := testutil.CollectAndCount(m.UncoveredMessages); n != 1 {
		t.Fatalf("%d uncovered_messages series, want stray's only", n)
	}
	if got := testutil.ToFloat64(m.UncoveredMessages.WithLabelValues("stray")); got != 2 {
		t.Errorf("uncovered_messages{integration=stray} = %v, want 2", got)
	}

	if _, err := stream.EnsureProcessorConsumer(ctx, js, config.Processor{Shard: "s2"}, "b", "stray"); err != nil {
		t.Fatal(err)
	}
	w.look(ctx)
	if n := testutil.CollectAndCount(m.UncoveredMessages); n != 0 {
		t.Errorf("%d uncovered_messages series once shard s2 takes stray, want none", n)
	}
}
