package intake

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/stream"
)

// shardCheckTimeout bounds the look at the other processors' durables.
const shardCheckTimeout = 3 * time.Second

// warnOverlappingDurables logs, once at start, every other processors'
// durable on INTAKE_IN ("processor" or "processor-{shard}") whose filter
// overlaps this processor's: both deployments would be delivered the same
// messages and apply them, each in its own database. Each shard's config
// is checked alone, so this is the one place two shards' configs meet.
// It warns rather than refuses: the other durable may be a left-over with
// no processor behind it (delete it), and a rolling move of an integration
// between shards passes through it. Not being able to list the consumers
// is only logged.
func (a *App) warnOverlappingDurables(ctx context.Context, js jetstream.JetStream, cfg *config.Config) {
	ctx, cancel := context.WithTimeout(ctx, shardCheckTimeout)
	defer cancel()
	own := stream.ProcessorConsumerConfig(cfg.Processor, integrationNames(cfg.Integrations)...)
	s, err := js.Stream(ctx, envelope.StreamIn)
	if err != nil {
		a.log.Warn("cannot look for other processors' durables overlapping this one", "stream", envelope.StreamIn, "err", err)
		return
	}
	list := s.ListConsumers(ctx)
	for info := range list.Info() {
		name := info.Name
		if name == own.Durable || (name != envelope.ConsumerName && !strings.HasPrefix(name, envelope.ConsumerName+"-")) {
			continue
		}
		if both := overlap(filters(own), filters(info.Config)); len(both) > 0 {
			a.log.Error("another processors' durable on "+envelope.StreamIn+" takes messages this one takes: two deployments "+
				"would apply them, each in its own database. Each integration belongs in exactly one shard's config "+
				"(processor.shard); delete a durable no processor uses any more (docs/scaling.md)",
				"durable", own.Durable, "other", name, "other_filter", filters(info.Config), "overlap", both)
		}
	}
	if err := list.Err(); err != nil {
		a.log.Warn("cannot look for other processors' durables overlapping this one", "stream", envelope.StreamIn, "err", err)
	}
}

// filters are a consumer's filter subjects; every subject of the stream
// when it has none.
func filters(c jetstream.ConsumerConfig) []string {
	switch {
	case len(c.FilterSubjects) > 0:
		return c.FilterSubjects
	case c.FilterSubject != "":
		return []string{c.FilterSubject}
	}
	return []string{envelope.SubjectInAll}
}

// overlap are the subjects of a that some subject of b can match too.
func overlap(a, b []string) []string {
	var out []string
	for _, x := range a {
		for _, y := range b {
			if envelope.SubjectsCollide(x, y) {
				out = append(out, x)
				break
			}
		}
	}
	return out
}
