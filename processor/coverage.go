package processor

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/telemetry"
)

// coverageCheckEvery is how often a processor looks for INTAKE_IN subjects
// that no processors' durable takes: one stream info with its subjects and
// one consumer list per replica a minute.
const coverageCheckEvery = time.Minute

// coverageWatch reports, by integration, the messages of INTAKE_IN that no
// processors' durable ("processor" or a shard's "processor-{shard}")
// filters on: in a sharded deployment, an integration ingress accepts and
// no shard's config lists. Nothing consumes them and no replayer
// reconciles them; they wait in the stream until max_age. Each shard's
// config is checked alone, so this look at the stream is the one place
// the gap shows (intake_processor_uncovered_messages,
// IntakeMessagesNoShardTakes).
type coverageWatch struct {
	js      jetstream.JetStream
	metrics *telemetry.Metrics
	log     *slog.Logger

	failing bool                // the last look failed (logged once)
	logged  map[string]struct{} // integrations with a series (logged once each)
}

// watchCoverage starts a coverageWatch until ctx ends or stop is called;
// its first look is at once.
func (p *Processor) watchCoverage(ctx context.Context) (stop func()) {
	w := &coverageWatch{js: p.o.JS, metrics: p.o.Metrics, log: p.o.Log, logged: map[string]struct{}{}}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(coverageCheckEvery)
		defer t.Stop()
		for {
			w.look(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// look reads INTAKE_IN's subjects and durables once and sets the gauge.
func (w *coverageWatch) look(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, coverageCheckEvery/2)
	defer cancel()
	subjects, filters, err := w.read(ctx)
	if err != nil {
		if !w.failing && ctx.Err() == nil {
			// Needs $JS.API.STREAM.INFO.INTAKE_IN and
			// $JS.API.CONSUMER.LIST.INTAKE_IN; the gauge keeps its last values.
			w.log.Warn("cannot look for INTAKE_IN subjects no processors' durable takes; intake_processor_uncovered_messages is stale until it answers", "err", err)
		}
		w.failing = true
		return
	}
	w.failing = false
	un := uncovered(subjects, filters)
	for integration, n := range un {
		w.metrics.UncoveredMessages.WithLabelValues(integration).Set(float64(n))
		if _, ok := w.logged[integration]; !ok {
			w.logged[integration] = struct{}{}
			w.log.Error("messages in "+envelope.StreamIn+" that no processors' durable takes: no shard's config lists their "+
				"integration, so nothing processes them and they wait until the stream's max_age. Add the integration to "+
				"one shard's config (processor.shard, docs/scaling.md), or take it off ingress's",
				"integration", integration, "messages", n, "durable_filters", filters)
		}
	}
	for integration := range w.logged {
		if _, ok := un[integration]; !ok {
			// Covered again (or aged out): no series, and logged again if it returns.
			w.metrics.UncoveredMessages.DeleteLabelValues(integration)
			delete(w.logged, integration)
		}
	}
}

// read returns INTAKE_IN's subjects with their message counts and the
// filters of every processors' durable on it.
func (w *coverageWatch) read(ctx context.Context) (map[string]uint64, []string, error) {
	s, err := w.js.Stream(ctx, envelope.StreamIn)
	if err != nil {
		return nil, nil, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(envelope.SubjectInAll))
	if err != nil {
		return nil, nil, err
	}
	var filters []string
	list := s.ListConsumers(ctx)
	for c := range list.Info() {
		if isProcessorDurable(c.Name) {
			filters = append(filters, consumerFilters(c.Config)...)
		}
	}
	if err := list.Err(); err != nil {
		return nil, nil, err
	}
	return info.State.Subjects, filters, nil
}

// isProcessorDurable reports whether name is a processors' durable on
// INTAKE_IN: "processor" or a shard's "processor-{shard}" (not the
// replayer's scan consumers, which take no message from anyone).
func isProcessorDurable(name string) bool {
	return name == envelope.ConsumerName || strings.HasPrefix(name, envelope.ConsumerName+"-")
}

// consumerFilters are a consumer's filter subjects; every subject of the
// stream when it has none.
func consumerFilters(c jetstream.ConsumerConfig) []string {
	switch {
	case len(c.FilterSubjects) > 0:
		return c.FilterSubjects
	case c.FilterSubject != "":
		return []string{c.FilterSubject}
	}
	return []string{envelope.SubjectInAll}
}

// uncovered counts, by integration (the third token of
// intake.in.{integration}.{type}), the messages of the subjects that no
// filter matches.
func uncovered(subjects map[string]uint64, filters []string) map[string]uint64 {
	out := map[string]uint64{}
	for subject, n := range subjects {
		if n == 0 || covered(subject, filters) {
			continue
		}
		integration := strings.TrimPrefix(subject, "intake.in.")
		integration, _, _ = strings.Cut(integration, ".")
		out[integration] += n
	}
	return out
}

// covered reports whether some filter matches subject (a literal subject:
// a filter matches it when the two collide).
func covered(subject string, filters []string) bool {
	for _, f := range filters {
		if envelope.SubjectsCollide(subject, f) {
			return true
		}
	}
	return false
}
