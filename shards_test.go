package intake_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/stream"
)

// TestOverlappingProcessorDurablesAreWarned: a shard's processor that
// finds another processors' durable taking its integrations' messages (the
// unsharded "processor", or a shard listing the same integration) says so
// at start, naming both; another shard's disjoint durable is no warning.
func TestOverlappingProcessorDurablesAreWarned(t *testing.T) {
	t.Parallel()
	cfg, js := lifecycleConfig(t)
	ctx := context.Background()
	durable := func(p config.Processor, integrations ...string) {
		t.Helper()
		if _, err := js.CreateOrUpdateConsumer(ctx, envelope.StreamIn, stream.ProcessorConsumerConfig(p, integrations...)); err != nil {
			t.Fatal(err)
		}
	}
	start := func(shard string) string {
		t.Helper()
		c := *cfg
		c.Processor.Shard = shard
		var logs testenv.Buffer
		a, err := intake.New(ctx, &c, intake.Options{Roles: intake.Roles{Processor: true}, HTTPAddr: "127.0.0.1:0",
			Log: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		return logs.String()
	}
	const warning = "another processors' durable on INTAKE_IN takes messages this one takes"

	durable(config.Processor{Shard: "b"}, "other") // another shard, disjoint
	if l := start("a"); strings.Contains(l, warning) {
		t.Errorf("a disjoint shard was warned about:\n%s", l)
	}
	durable(config.Processor{Shard: "c"}, "demo", "more") // another shard listing demo too
	durable(config.Processor{})                           // the unsharded durable, left behind
	l := start("a")
	for _, want := range []string{warning, "other=processor-c", "other=processor ", `overlap=[intake.in.demo.>]`} {
		if !strings.Contains(l, want) {
			t.Errorf("the log does not say %q:\n%s", want, l)
		}
	}
	if strings.Contains(l, "other=processor-b") {
		t.Errorf("the disjoint shard b was warned about:\n%s", l)
	}
	// The unsharded processor overlaps every shard's durable.
	if l := start(""); !strings.Contains(l, "other=processor-b") || !strings.Contains(l, "other=processor-c") {
		t.Errorf("the unsharded processor did not warn about the shards' durables:\n%s", l)
	}
}
