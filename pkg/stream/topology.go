package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/backoff"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
)

// InConfig is INTAKE_IN: every verified delivery, raw, for processing and replay.
func InConfig(c config.Stream) jetstream.StreamConfig {
	return logStream(envelope.StreamIn, "Intake: verified webhook deliveries, raw bytes as received", c, envelope.SubjectInAll)
}

// OutConfig is INTAKE_OUT: processed events for internal subscribers, and
// the copies an operator redelivered to one HTTP destination
// (intake.dispatch.{destination}), which only that destination's consumer
// takes.
func OutConfig(c config.Stream) jetstream.StreamConfig {
	return logStream(envelope.StreamOut, "Intake: processed events, one per logical event, for internal services", c,
		envelope.SubjectOutAll, envelope.SubjectDispatchAll)
}

// logStream is the shape both logs share: limits retention (dedup must
// survive restarts and replay needs the log after acks), file storage, and
// discard-new when full — refusing new messages rather than silently
// dropping old ones, so ingress answers 503 and the provider retries.
func logStream(name, description string, c config.Stream, subjects ...string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        name,
		Description: description,
		Subjects:    subjects,
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
		MaxAge:      c.MaxAge,
		MaxBytes:    c.MaxBytes,
		Duplicates:  c.DuplicateWindow,
		Discard:     jetstream.DiscardNew,
	}
}

// ReceiptsConfig is INTAKE_RECEIPTS: one small record per answered delivery,
// folded into the delivery history. No dedup: every delivery counts, and
// the fold is idempotent by receipt id. Kept a week: the fold runs within
// seconds; the rest is slack for an outage.
func ReceiptsConfig(c config.Stream) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        envelope.StreamReceipts,
		Description: "Intake: delivery receipts for the delivery history",
		Subjects:    []string{envelope.SubjectReceiptsAll},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
		MaxAge:      min(c.MaxAge, 7*24*time.Hour),
		Duplicates:  time.Second,
		Discard:     jetstream.DiscardOld,
	}
}

// ReceiptsConsumerConfig is the durable consumer the processors fold
// receipts from: "receipts" on every integration's receipts or, for a
// shard (processor.shard), "receipts-{shard}" on its integrations' only.
func ReceiptsConsumerConfig(p config.Processor, integrations ...string) jetstream.ConsumerConfig {
	p = p.WithDefaults()
	cc := jetstream.ConsumerConfig{
		Durable:       ReceiptsDurable(p.Shard),
		Description:   "Intake processors: fold delivery receipts into the history",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       p.AckWait,
		MaxDeliver:    -1, // a receipt is small and the fold idempotent: never give up
		FilterSubject: envelope.SubjectReceiptsAll,
		MaxAckPending: p.ReceiptsMaxAckPending(),
	}
	if p.Shard != "" {
		cc.Description += " (shard " + p.Shard + ")"
		filter(&cc, integrations, envelope.SubjectReceipt)
	}
	return cc
}

// Ensure creates or updates the streams. It is idempotent and needs
// JetStream admin rights: `intake migrate` (as the admin user) and `intake
// dev` run it; the roles only Check. Each request gets its own short
// deadline and is retried until ctx ends: a request sent during a cluster
// election can go unanswered, and must not hold the start for ctx's whole
// budget.
func Ensure(ctx context.Context, js jetstream.JetStream, c config.Stream) error {
	for _, sc := range []jetstream.StreamConfig{InConfig(c), OutConfig(c), ReceiptsConfig(c)} {
		err := retry(ctx, func(ctx context.Context) error {
			_, err := js.CreateOrUpdateStream(ctx, sc)
			return err
		})
		if err != nil {
			return fmt.Errorf("stream %s: create or update: %w", sc.Name, err)
		}
	}
	return nil
}

// attemptTimeout bounds one JetStream API request during start-up.
const attemptTimeout = 3 * time.Second

// retryBackoff spaces the attempts of retry.
var retryBackoff = backoff.Backoff{Min: 250 * time.Millisecond, Max: 2 * time.Second}

// retry calls f with a per-attempt deadline until it succeeds or ctx ends;
// it returns the last error. A refusal (see ErrRefused) ends it at once.
func retry(ctx context.Context, f func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := f(actx)
		cancel()
		if err == nil {
			return nil
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && !passing(apiErr) {
			return fmt.Errorf("%w: %w", ErrRefused, err) // an answer, not an outage: retrying cannot change it
		}
		if backoff.Sleep(ctx, retryBackoff.Next(attempt)) != nil {
			return err
		}
	}
}

// ProcessorConsumerConfig is the durable pull consumer all processors
// share: "processor" on every integration's subjects or, for a shard
// (processor.shard), "processor-{shard}" on the subjects of integrations
// only — the shard's, as its config lists them.
func ProcessorConsumerConfig(p config.Processor, integrations ...string) jetstream.ConsumerConfig {
	p = p.WithDefaults()
	cc := jetstream.ConsumerConfig{
		Durable:       ProcessorDurable(p.Shard),
		Description:   "Intake processors: inbox claim + domain change in one transaction",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       p.AckWait,
		MaxDeliver:    p.MaxDeliver,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		FilterSubject: envelope.SubjectInAll,
		// The window all replicas share (processor.max_ack_pending): sized
		// from the deployment so added replicas add batches in flight.
		MaxAckPending: p.MaxAckPending,
	}
	if p.Shard != "" {
		cc.Description += " (shard " + p.Shard + ")"
		filter(&cc, integrations, func(name string) string { return envelope.SubjectInPrefix(name) + ">" })
	}
	return cc
}

// ProcessorDurable is the processors' durable on INTAKE_IN: "processor",
// or "processor-{shard}".
func ProcessorDurable(shard string) string {
	if shard == "" {
		return envelope.ConsumerName
	}
	return envelope.ConsumerName + "-" + shard
}

// ReceiptsDurable is the processors' durable on INTAKE_RECEIPTS:
// "receipts", or "receipts-{shard}".
func ReceiptsDurable(shard string) string {
	if shard == "" {
		return envelope.ConsumerReceipts
	}
	return envelope.ConsumerReceipts + "-" + shard
}

// filter sets cc's filter to the subjects of integrations (sorted, so that
// the same list is the same config): one in FilterSubject, where a
// permission can pin it, several in FilterSubjects.
func filter(cc *jetstream.ConsumerConfig, integrations []string, subject func(string) string) {
	subjects := make([]string, 0, len(integrations))
	for _, name := range integrations {
		subjects = append(subjects, subject(name))
	}
	slices.Sort(subjects)
	subjects = slices.Compact(subjects)
	cc.FilterSubject, cc.FilterSubjects = "", nil
	if len(subjects) == 1 {
		cc.FilterSubject = subjects[0]
	} else {
		cc.FilterSubjects = subjects
	}
}

// errShardWithoutIntegrations ends a shard's consumer set-up that was given
// no integrations: a consumer without a filter would take every shard's
// messages.
var errShardWithoutIntegrations = fmt.Errorf("%w: processor.shard is set but no integrations were given to filter on", ErrRefused)

// EnsureProcessorConsumer creates or updates the durable processor consumer
// (see ProcessorConsumerConfig; integrations matter for a shard only).
// Settings JetStream can edit in place (the window max_ack_pending,
// ack_wait, max_deliver, a shard's filter) follow the config of the
// processor that started last; the delivered and acked state is kept.
func EnsureProcessorConsumer(ctx context.Context, js jetstream.JetStream, p config.Processor, integrations ...string) (jetstream.Consumer, error) {
	return ensureConsumer(ctx, js, envelope.StreamIn, p.Shard, ProcessorConsumerConfig(p, integrations...), len(integrations))
}

// EnsureReceiptsConsumer creates or updates the durable receipts consumer
// (see ReceiptsConsumerConfig).
func EnsureReceiptsConsumer(ctx context.Context, js jetstream.JetStream, p config.Processor, integrations ...string) (jetstream.Consumer, error) {
	return ensureConsumer(ctx, js, envelope.StreamReceipts, p.Shard, ReceiptsConsumerConfig(p, integrations...), len(integrations))
}

func ensureConsumer(ctx context.Context, js jetstream.JetStream, stream, shard string, cc jetstream.ConsumerConfig, integrations int) (jetstream.Consumer, error) {
	if shard != "" && integrations == 0 {
		return nil, fmt.Errorf("stream %s: consumer %s: %w", stream, cc.Durable, errShardWithoutIntegrations)
	}
	var cons jetstream.Consumer
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		cons, err = js.CreateOrUpdateConsumer(ctx, stream, cc)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("stream %s: consumer %s: %w", stream, cc.Durable, err)
	}
	return cons, nil
}

// WaitReady polls until JetStream answers account info or ctx ends; roles
// call it at start so a NATS that is still recovering streams (or electing
// leaders) is waited for, one short attempt at a time.
func WaitReady(ctx context.Context, js jetstream.JetStream) error {
	err := retry(ctx, func(ctx context.Context) error {
		_, err := js.AccountInfo(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("jetstream not ready: %w", Refusal(js, err))
	}
	return nil
}

// Refusal adds the connection's last permissions violation to err: the
// server drops a request the user may not send and says so only on the
// side, so without it a missing permission reads as a timeout.
// errors.Is(Refusal(js, err), nats.ErrPermissionViolation) tells a role
// to stop retrying.
func Refusal(js jetstream.JetStream, err error) error {
	last := js.Conn().LastError()
	if errors.Is(last, nats.ErrPermissionViolation) {
		return fmt.Errorf("%w (the server refused this user: %w)", err, last)
	}
	return err
}
