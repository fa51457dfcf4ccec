package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/time/rate"

	"github.com/intakehq/intake/internal/backoff"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/stream"
	"github.com/intakehq/intake/pkg/telemetry"
)

// Options configure a Dispatcher.
type Options struct {
	// Destinations to deliver to, as the config has them (their defaults
	// are applied again here). None: the dispatcher only removes the
	// durables of destinations no longer configured.
	Destinations []config.Destination
	Store        *store.Store        // required: the delivery log and the destinations' state
	JS           jetstream.JetStream // required
	Metrics      *telemetry.Metrics  // defaults to a private registry's
	Log          *slog.Logger        // defaults to discarding
	// Instance names this dispatcher in intake.destination_state. Defaults
	// to the host name.
	Instance string
	// StateInterval is how often the dispatcher reads the destinations'
	// state (an operator's pause). Defaults to DefaultStateInterval (2s).
	StateInterval time.Duration
}

// Defaults of Options, and of the destinations' consumers.
const (
	DefaultStateInterval = 2 * time.Second
	// backlogInterval is how often a dispatcher looks at each
	// destination's backlog and its oldest message.
	backlogInterval = 10 * time.Second
	// maxAckPending is each destination consumer's window: the messages
	// delivered and not yet acknowledged, those waiting out a retry
	// included. The dispatcher's own max_in_flight bounds what is sent at
	// once; the window only has to hold the retries.
	maxAckPending = 10000
)

// ackMargin is added to a destination's timeout for its consumer's ack
// deadline: the attempt, then its log row, then the ack. A variable for the
// tests, which shorten it.
var ackMargin = 30 * time.Second

// Dispatcher delivers every destination's messages.
type Dispatcher struct {
	o       Options
	dests   []*destination
	writer  *logWriter
	circuit chan circuitChange
}

// New builds a Dispatcher; nothing runs until Run.
func New(o Options) (*Dispatcher, error) {
	if o.Store == nil || o.JS == nil {
		return nil, errors.New("dispatcher: Store and JS are required")
	}
	if o.Metrics == nil {
		o.Metrics = telemetry.NewMetricsFor(telemetry.Roles{Dispatcher: true})
	}
	if o.Log == nil {
		o.Log = telemetry.Discard()
	}
	if o.Instance == "" {
		o.Instance, _ = os.Hostname()
	}
	if o.StateInterval <= 0 {
		o.StateInterval = DefaultStateInterval
	}
	d := &Dispatcher{o: o, circuit: make(chan circuitChange, 64)}
	d.writer = newLogWriter(o.Store, o.Log, &o.Metrics.Dispatch)
	for i, c := range o.Destinations {
		c = c.WithDefaults()
		// The integrations' names are the config's to check (config.Validate).
		known := map[string]bool{}
		for _, in := range c.Match.Integrations {
			known[in] = true
		}
		if err := c.Validate(fmt.Sprintf("destinations[%d] (%s)", i, c.Name), known); err != nil {
			return nil, fmt.Errorf("dispatcher: %w", err)
		}
		sg, err := newSigner(c.Secrets)
		if err != nil {
			return nil, fmt.Errorf("dispatcher: destinations[%d] (%s).%w", i, c.Name, err)
		}
		if len(sg.keys) == 0 {
			return nil, fmt.Errorf("dispatcher: destinations[%d] (%s).secrets: none loaded (load the config with config.DestinationSecrets)", i, c.Name)
		}
		u, err := url.Parse(c.URL)
		if err != nil {
			return nil, fmt.Errorf("dispatcher: destinations[%d] (%s).url: %w", i, c.Name, err)
		}
		client := newClient(c.Timeout, c.MaxInFlight)
		dst := &destination{cfg: c, client: client, transport: client.Transport, url: u, destinationValue: []string{c.Name}, signer: sg,
			breaker: newBreaker(c.Breaker), log: o.Log, m: &o.Metrics.Dispatch, writer: d.writer, circuit: d.circuit,
			latency:   o.Metrics.Dispatch.Latency.WithLabelValues(c.Name),
			delivered: o.Metrics.Dispatch.Attempts.WithLabelValues(c.Name, store.DispatchDelivered, "")}
		if c.Rate.PerSecond > 0 {
			dst.limiter = rate.NewLimiter(rate.Limit(c.Rate.PerSecond), c.Rate.Burst)
		}
		d.dests = append(d.dests, dst)
	}
	return d, nil
}

// ConsumerConfig is destination d's durable consumer on INTAKE_OUT: one
// filter per tenant and integration of its match (every processed message
// without either) and one for the copies an operator redelivers to it
// (envelope.SubjectDispatch), explicit acks, retries under the
// dispatcher's control (no MaxDeliver), new messages only from its creation
// on.
func ConsumerConfig(d config.Destination) jetstream.ConsumerConfig {
	d = d.WithDefaults()
	tenants, integrations := d.Match.Tenants, d.Match.Integrations
	if len(tenants) == 0 {
		tenants = []string{""}
	}
	if len(integrations) == 0 {
		integrations = []string{""}
	}
	var filters []string
	for _, t := range tenants {
		for _, in := range integrations {
			filters = append(filters, envelope.SubjectOutFilter(t, in))
		}
	}
	return jetstream.ConsumerConfig{
		Durable:        d.Durable(),
		Description:    "Intake dispatcher: destination " + d.Name,
		DeliverPolicy:  jetstream.DeliverNewPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        d.Timeout + ackMargin,
		MaxDeliver:     -1,
		MaxAckPending:  maxAckPending,
		FilterSubjects: append(filters, envelope.SubjectDispatch(d.Name)),
	}
}

// Run sets up the consumers (waiting for NATS within ctx), removes the
// durables of destinations no longer configured, and delivers until ctx
// ends; then it lets the deliveries in flight finish (each within its
// destination's timeout), writes their log rows and acknowledges them. It
// returns nil after a shutdown, an error only when it cannot start.
func (d *Dispatcher) Run(ctx context.Context) error {
	if err := d.setup(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	var writing, watching, delivering sync.WaitGroup
	writing.Go(d.writer.run)
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	watching.Go(func() { d.watch(watchCtx) })
	for _, dst := range d.dests {
		delivering.Go(func() { dst.run(ctx) })
	}
	<-ctx.Done()
	delivering.Wait()
	close(d.writer.in)
	writing.Wait()
	stopWatch()
	watching.Wait()
	for _, dst := range d.dests {
		dst.client.CloseIdleConnections()
	}
	return nil
}

// setupAttempt bounds one attempt of setup's requests.
const setupAttempt = 10 * time.Second

// setup creates or updates every destination's consumer and removes the
// dispatcher durables no destination names, retrying while NATS answers
// with errors that waiting may mend.
func (d *Dispatcher) setup(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		// Each attempt has a deadline of its own: a refused request is
		// never answered, and must not wait out Run's whole context.
		actx, cancel := context.WithTimeout(ctx, setupAttempt)
		err := d.ensureConsumers(actx)
		cancel()
		if err == nil {
			return nil
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.Code >= 400 && apiErr.Code < 500 && apiErr.Code != 408 {
			return err // refused: a permission, a bad filter
		}
		// A request this NATS user may not send goes unanswered (the
		// server says so on the side): no wait mends that.
		if refused := stream.Refusal(d.o.JS, err); errors.Is(refused, nats.ErrPermissionViolation) {
			return fmt.Errorf("%w (see deploy/nats/intake.conf's dispatcher user)", refused)
		}
		if attempt == 0 {
			d.o.Log.Warn("dispatcher: cannot set up the destinations' consumers yet; trying again", "err", err)
		}
		if backoff.Sleep(ctx, fetchBackoff.Next(attempt)) != nil {
			return ctx.Err()
		}
	}
}

func (d *Dispatcher) ensureConsumers(ctx context.Context) error {
	want := map[string]bool{}
	for _, dst := range d.dests {
		cons, err := d.o.JS.CreateOrUpdateConsumer(ctx, envelope.StreamOut, ConsumerConfig(dst.cfg))
		if err != nil {
			return fmt.Errorf("dispatcher: consumer %s: %w", dst.cfg.Durable(), err)
		}
		dst.cons, dst.js = cons, d.o.JS
		want[dst.cfg.Durable()] = true
	}
	s, err := d.o.JS.Stream(ctx, envelope.StreamOut)
	if err != nil {
		return fmt.Errorf("dispatcher: %s: %w", envelope.StreamOut, err)
	}
	names := s.ConsumerNames(ctx)
	var stale []string
	for name := range names.Name() {
		if strings.HasPrefix(name, config.DestinationDurablePrefix) && !want[name] {
			stale = append(stale, name)
		}
	}
	if err := names.Err(); err != nil {
		return fmt.Errorf("dispatcher: list the consumers of %s: %w", envelope.StreamOut, err)
	}
	for _, name := range stale {
		err := d.o.JS.DeleteConsumer(ctx, envelope.StreamOut, name)
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("dispatcher: remove consumer %s: %w", name, err)
		}
		d.o.Log.Info("destination no longer configured: its consumer removed (what it had not delivered will not be)",
			"destination", strings.TrimPrefix(name, config.DestinationDurablePrefix), "consumer", name)
	}
	return nil
}
