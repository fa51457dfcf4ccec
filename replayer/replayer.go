package replayer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/replayer/apiclient"
)

// Headers the replayer adds to redelivered messages on INTAKE_OUT (the
// shared vocabulary's: envelope.HeaderRedeliveryID, HeaderOriginalMsgID).
const (
	HeaderRedeliveryID  = envelope.HeaderRedeliveryID
	HeaderOriginalMsgID = envelope.HeaderOriginalMsgID
)

// Options configure a Replayer.
type Options struct {
	Store  *store.Store        // required
	JS     jetstream.JetStream // required
	Tokens []config.Token      // API bearer tokens
	Log    *slog.Logger        // defaults to discarding
	// TracerProvider gives each republished message a span linked to the
	// original's trace (docs/tracing.md). nil (the default) is tracing off.
	TracerProvider trace.TracerProvider
	// Registry, when set, gets the replayer's metrics.
	Registry prometheus.Registerer
	// Shard, when set, makes this replayer one shard's (processor.shard;
	// give it the shard's config and database): reconcile and re-drive read
	// the ack floor of the durable "processor-{shard}", and reconciles,
	// re-drives, replays and redeliveries cover Integrations' events only;
	// a request naming another integration is refused. Empty (the
	// default): the durable "processor", every integration.
	Shard string
	// Integrations are the names of the shard's integrations (its config's
	// integrations[].name). Required with Shard. They seed the failed and
	// quarantined gauges at 0, and a filter or selector naming an
	// integration not among them is refused (400, naming them); empty (a
	// library replayer without them), any name is taken.
	Integrations []string
	// Destinations are the config's HTTP destinations (their secrets need
	// not be loaded): the API shows their state and delivery log, pauses
	// them, and redelivers to one of them. A request naming another is
	// refused (400, naming them).
	Destinations []config.Destination
	// Auth bounds failed authentications per client address; its Log and
	// Failures default to Log and the replayer's
	// intake_api_auth_failures_total.
	Auth AuthOptions

	// DefaultRate (api.replays.default_rate) is the pace, in events per second,
	// of a replay that asks for none. Defaults to DefaultReplayRate (100); at
	// most MaxRate.
	DefaultRate int
	// MaxRate (api.replays.max_rate) caps the rate a replay may ask for.
	// Defaults to DefaultMaxRate (10000).
	MaxRate int
	// MaxMatched (api.replays.max_matched) refuses selectors matching more
	// events (narrow them or split the replay), and reconciles of ranges
	// holding more ingress messages. Defaults to DefaultMaxMatched (1,000,000).
	MaxMatched int
	// ReexecuteApprovalAbove (api.replays.reexecute_approval_above): a
	// re-execution that would publish more events is recorded awaiting
	// approval and publishes once an operator other than its requester
	// approves it (Approve). Defaults to DefaultReexecuteApprovalAbove
	// (1000); -1 turns approval off.
	ReexecuteApprovalAbove int
	// MaxRunning (api.replays.max_running) bounds the replays this replayer
	// publishes at once; each holds a database connection for its lock. Others
	// wait their turn. Defaults to DefaultMaxRunning (2).
	MaxRunning int
	// ReconcileMaxSpan (api.reconcile.max_span) bounds one reconcile: it checks
	// at most this many stream messages (a wider range is refused: split it).
	// Defaults to DefaultReconcileMaxSpan (100,000).
	ReconcileMaxSpan int
	// ReconcileViewerMaxSpan (api.reconcile.viewer_max_span) is
	// ReconcileMaxSpan for a viewer's token. Defaults to
	// DefaultReconcileViewerMaxSpan (10,000); at most ReconcileMaxSpan.
	ReconcileViewerMaxSpan int
	// MaxReconciles (api.reconcile.max_running) bounds the reconciles this
	// replayer runs at once for the API (each scans the stream and reads the
	// inbox), viewers' reconciles holding at most one of them; more get
	// ErrBusy (429 with Retry-After). The re-drive's passes run besides, one
	// at a time, never waiting for these. Defaults to DefaultMaxReconciles (2).
	MaxReconciles int
	// PayloadSearch (api.payload_search) says who may search payloads
	// (GET /api/v1/search: operators, viewers with Viewers) and bounds one
	// search; zero fields take config's defaults (10000 messages, 24h).
	PayloadSearch config.APIPayloadSearch
	// ResumeInterval (api.replays.resume_interval) is how often Run looks for
	// running replays no replayer publishes (their replayer died). Defaults to
	// DefaultResumeInterval (10s).
	ResumeInterval time.Duration
	// StatsInterval (api.stats_interval) is how often Run reads, for the
	// metrics, the failed and quarantined counts of the inbox and the replays'
	// states from Postgres. Defaults to DefaultStatsInterval (30s).
	StatsInterval time.Duration
	// GapCheckInterval (api.gap_check_interval) is how often Run checks
	// INTAKE_IN for messages lost behind Intake's back (see CheckGaps).
	// Defaults to DefaultGapCheckInterval (5m).
	GapCheckInterval time.Duration
	// RedriveInterval (api.redrive_interval) is how often Run re-drives events
	// the processor acknowledged whose inbox row is gone — a commit lost in a
	// Postgres failover (see RedrivePass). Defaults to DefaultRedriveInterval
	// (1m); negative turns re-driving off.
	RedriveInterval time.Duration
	// RedriveLookback (api.redrive_lookback) is how far back a pass looks at
	// start and after a failover: it must cover the replication lag a failover
	// can lose. Defaults to DefaultRedriveLookback (10m).
	RedriveLookback time.Duration
	// ServerWatchInterval is how often Run reads which Postgres server answers
	// (store.ServerWatcher), to start a lookback pass after a failover.
	// Defaults to store.DefaultServerWatchInterval (5s).
	ServerWatchInterval time.Duration
	// PublishTimeout (api.replays.publish_timeout) bounds the wait for one
	// batch's PubAcks. Defaults to DefaultPublishTimeout (10s).
	PublishTimeout time.Duration
	// RetryFor (api.replays.retry_for) is how long a replay keeps retrying
	// without progress (NATS unavailable, stream full) before it fails.
	// Defaults to DefaultRetryFor (2m).
	RetryFor time.Duration
}

// Defaults of Options: the api section's (pkg/config), one home for the
// config file and a program's Options.
const (
	DefaultReplayRate = config.DefaultReplayRate
	DefaultMaxRate    = config.DefaultMaxReplayRate
	DefaultMaxMatched = config.DefaultMaxMatched
	// DefaultReexecuteApprovalAbove: see Options.ReexecuteApprovalAbove.
	DefaultReexecuteApprovalAbove = config.DefaultReexecuteApprovalAbove
	DefaultMaxRunning             = config.DefaultMaxRunningReplays
	DefaultResumeInterval         = config.DefaultResumeInterval
	DefaultGapCheckInterval       = config.DefaultGapCheckInterval
	DefaultStatsInterval          = config.DefaultStatsInterval
	DefaultPublishTimeout         = config.DefaultReplayPublishTimeout
	DefaultRetryFor               = config.DefaultReplayRetryFor
	DefaultRedriveInterval        = config.DefaultRedriveInterval
	DefaultRedriveLookback        = config.DefaultRedriveLookback
)

// Defaults of the reconcile bounds of Options (api.reconcile).
const (
	DefaultReconcileMaxSpan       = config.DefaultReconcileMaxSpan
	DefaultReconcileViewerMaxSpan = config.DefaultReconcileViewerMaxSpan
	DefaultMaxReconciles          = config.DefaultMaxReconciles
)

// WithDefaults returns o with every unset field at its default.
func (o Options) WithDefaults() Options {
	if o.Log == nil {
		o.Log = telemetry.Discard()
	}
	o.DefaultRate = cmp.Or(o.DefaultRate, DefaultReplayRate)
	o.MaxRate = cmp.Or(o.MaxRate, DefaultMaxRate)
	o.MaxMatched = cmp.Or(o.MaxMatched, DefaultMaxMatched)
	o.ReexecuteApprovalAbove = cmp.Or(o.ReexecuteApprovalAbove, DefaultReexecuteApprovalAbove)
	o.MaxRunning = cmp.Or(o.MaxRunning, DefaultMaxRunning)
	o.ReconcileMaxSpan = cmp.Or(o.ReconcileMaxSpan, DefaultReconcileMaxSpan)
	o.ReconcileViewerMaxSpan = cmp.Or(o.ReconcileViewerMaxSpan, min(DefaultReconcileViewerMaxSpan, o.ReconcileMaxSpan))
	o.PayloadSearch.MaxMessages = cmp.Or(o.PayloadSearch.MaxMessages, config.DefaultPayloadSearchMaxMessages)
	o.PayloadSearch.MaxWindow = cmp.Or(o.PayloadSearch.MaxWindow, config.DefaultPayloadSearchMaxWindow)
	o.MaxReconciles = cmp.Or(o.MaxReconciles, DefaultMaxReconciles)
	o.ResumeInterval = cmp.Or(o.ResumeInterval, DefaultResumeInterval)
	o.GapCheckInterval = cmp.Or(o.GapCheckInterval, DefaultGapCheckInterval)
	o.StatsInterval = cmp.Or(o.StatsInterval, DefaultStatsInterval)
	o.RedriveInterval = cmp.Or(o.RedriveInterval, DefaultRedriveInterval)
	o.RedriveLookback = cmp.Or(o.RedriveLookback, DefaultRedriveLookback)
	o.ServerWatchInterval = cmp.Or(o.ServerWatchInterval, store.DefaultServerWatchInterval)
	o.PublishTimeout = cmp.Or(o.PublishTimeout, DefaultPublishTimeout)
	o.RetryFor = cmp.Or(o.RetryFor, DefaultRetryFor)
	return o
}

// Validate checks o; errors name the field.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("replayer: Options."+format, args...))
	}
	if o.Store == nil || o.JS == nil {
		bad("Store and Options.JS are required")
	}
	if o.Shard != "" && len(o.Integrations) == 0 {
		bad("Integrations: required with Options.Shard (%q): a shard's replayer answers for the integrations its config lists", o.Shard)
	}
	if o.MaxRate < 1 {
		bad("MaxRate: must be at least 1, got %d", o.MaxRate)
	}
	if o.DefaultRate < 1 || o.DefaultRate > o.MaxRate {
		bad("DefaultRate: must be 1..MaxRate (%d), got %d", o.MaxRate, o.DefaultRate)
	}
	if o.MaxMatched < 1 {
		bad("MaxMatched: must be at least 1, got %d", o.MaxMatched)
	}
	if o.ReexecuteApprovalAbove < -1 {
		bad("ReexecuteApprovalAbove: must be a count of events, or -1 (no approval), got %d", o.ReexecuteApprovalAbove)
	}
	if o.MaxRunning < 1 {
		bad("MaxRunning: must be at least 1, got %d", o.MaxRunning)
	}
	if o.ReconcileMaxSpan < 1 {
		bad("ReconcileMaxSpan: must be at least 1, got %d", o.ReconcileMaxSpan)
	}
	if o.ReconcileViewerMaxSpan < 1 || o.ReconcileViewerMaxSpan > o.ReconcileMaxSpan {
		bad("ReconcileViewerMaxSpan: must be 1..ReconcileMaxSpan (%d), got %d", o.ReconcileMaxSpan, o.ReconcileViewerMaxSpan)
	}
	if o.MaxReconciles < 1 {
		bad("MaxReconciles: must be at least 1, got %d", o.MaxReconciles)
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"ResumeInterval", o.ResumeInterval}, {"GapCheckInterval", o.GapCheckInterval}, {"StatsInterval", o.StatsInterval},
		{"RedriveLookback", o.RedriveLookback}, {"ServerWatchInterval", o.ServerWatchInterval}, {"PublishTimeout", o.PublishTimeout}, {"RetryFor", o.RetryFor}} {
		if d.d <= 0 {
			bad("%s: must be positive, got %s", d.name, d.d)
		}
	}
	return errors.Join(errs...)
}

// Replayer serves the operator API and publishes replays.
type Replayer struct {
	o       Options
	metrics replayMetrics
	wake    chan struct{}

	// reconciles holds a slot per API reconcile running (MaxReconciles);
	// viewerReconcile the one of them a viewer's token may hold. The
	// re-drive takes neither: its passes run one at a time (redrive.pass),
	// which is its slot, so no API caller can hold it off.
	reconciles      chan struct{}
	viewerReconcile chan struct{}

	mu      sync.Mutex
	running map[string]context.CancelFunc // replays this replayer publishes

	redrive redriveState
}

type replayMetrics struct {
	published    *prometheus.CounterVec // mode
	running      prometheus.Gauge
	authFailures *prometheus.CounterVec // reason
	gaps         *prometheus.GaugeVec   // stream, kind

	redrivePasses     *prometheus.CounterVec // trigger
	redriven          prometheus.Counter
	serverChanges     prometheus.Counter
	redrivenConflicts prometheus.Counter
	redriveUnfixable  prometheus.Counter

	// From Postgres, every StatsInterval (see watchStats).
	inboxEvents      *prometheus.GaugeVec // integration, status (failed, quarantined)
	replays          *prometheus.GaugeVec // state
	replaysMatched   prometheus.Gauge     // running replays
	replaysPublished prometheus.Gauge     // running replays
	replaysOldest    prometheus.Gauge
	statsAt          prometheus.Gauge
}

// RegisterMetrics registers the replayer's series on reg, as New does with
// Options.Registry: for a program that lists what a replayer exports.
func RegisterMetrics(reg prometheus.Registerer) error {
	_, err := newReplayMetrics(reg)
	return err
}

// newReplayMetrics builds the replayer's metrics and, with reg, registers
// them (or takes those a replayer on the same registry registered).
func newReplayMetrics(reg prometheus.Registerer) (replayMetrics, error) {
	m := replayMetrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "replayer",
			Name: "published_total", Help: "Messages republished by replays and redeliveries, by mode."}, []string{"mode"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "replayer",
			Name: "running", Help: "Replays this replayer is publishing."}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Subsystem: "api",
			Name: "auth_failures_total", Help: "Operator API requests refused authentication, by reason (missing, invalid, throttled)."}, []string{"reason"}),
		gaps: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "stream",
			Name: "gap_messages", Help: "Acknowledged messages missing from a stream at the last gap check, by kind " +
				"(deleted: inside the stream's range; rolled_back: past its last sequence, which the inbox has seen; " +
				"receipt_without_event: events a duplicate receipt proves were stored, settled with no inbox row or rejection)."},
			[]string{"stream", "kind"}),
		redrivePasses: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "intake", Name: "redrive_passes_total",
			Help: "Re-drive passes run (see RedrivePass), by trigger (start, scheduled, failover)."}, []string{"trigger"}),
		redriven: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "intake", Name: "redriven_events_total",
			Help: "Events acknowledged by the processor without an inbox row that a re-drive pass replayed."}),
		redrivenConflicts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "intake", Name: "redrive_conflicts_recorded_total",
			Help: "Conflict records a re-drive pass wrote again: conflicting deliveries acknowledged by the processor whose record was lost."}),
		redriveUnfixable: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "intake", Name: "redrive_unfixable_total",
			Help: "Messages acknowledged by the processor without an inbox row that are still missing after a re-drive replay " +
				"ran for them (counted once each): not replayed again, see the error log."}),
		serverChanges: telemetry.NewPostgresServerChanges(),
		inboxEvents: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "inbox",
			Name: "events", Help: "Inbox rows failed or quarantined (the only statuses counted), by integration and status, at the replayer's last stats pass (aggregate with max)."},
			[]string{"integration", "status"}),
		replays: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "intake",
			Name: "replays", Help: "Replays and redeliveries recorded, by state (running, done, failed, cancelled), at the replayer's last stats pass."},
			[]string{"state"}),
		replaysMatched: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "replays",
			Name: "running_matched_events", Help: "Events the running replays matched, all together, at the replayer's last stats pass."}),
		replaysPublished: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "replays",
			Name: "running_published_events", Help: "Events the running replays published so far, all together, at the replayer's last stats pass."}),
		replaysOldest: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "replays",
			Name: "oldest_running_age_seconds", Help: "Age of the oldest running replay (0 when none runs), at the replayer's last stats pass."}),
		statsAt: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "intake", Subsystem: "replayer",
			Name: "stats_timestamp_seconds", Help: "When the replayer last read the inbox and replay counts from Postgres (Unix time)."}),
	}
	if reg == nil {
		return m, nil
	}
	err := errors.Join(registerInto(reg, &m.published), registerInto(reg, &m.running), registerInto(reg, &m.authFailures),
		registerInto(reg, &m.gaps), registerInto(reg, &m.redrivePasses), registerInto(reg, &m.redriven),
		registerInto(reg, &m.serverChanges), registerInto(reg, &m.redrivenConflicts), registerInto(reg, &m.redriveUnfixable),
		registerInto(reg, &m.inboxEvents), registerInto(reg, &m.replays), registerInto(reg, &m.replaysMatched),
		registerInto(reg, &m.replaysPublished), registerInto(reg, &m.replaysOldest), registerInto(reg, &m.statsAt))
	if err != nil {
		return m, fmt.Errorf("replayer: metrics: %w", err)
	}
	return m, nil
}

// New fills o's defaults, then validates it: a bad value is an error
// naming its field, never silently replaced.
func New(o Options) (*Replayer, error) {
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	m, err := newReplayMetrics(o.Registry)
	if err != nil {
		return nil, err
	}
	if o.Auth.Log == nil {
		o.Auth.Log = o.Log
	}
	if o.Auth.Failures == nil {
		o.Auth.Failures = m.authFailures
	}
	return &Replayer{o: o, metrics: m, wake: make(chan struct{}, 1), reconciles: make(chan struct{}, o.MaxReconciles),
		viewerReconcile: make(chan struct{}, 1), running: map[string]context.CancelFunc{}, redrive: redriveState{failover: make(chan struct{}, 1)}}, nil
}

// register registers c, or returns the collector already registered under
// its name: a second replayer on the same registry shares the collectors.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	var are prometheus.AlreadyRegisteredError
	if err := reg.Register(c); errors.As(err, &are) {
		return are.ExistingCollector.(C), nil
	} else if err != nil {
		return c, err
	}
	return c, nil
}

// registerInto registers *c, or sets it to the collector already
// registered under its name.
func registerInto[C prometheus.Collector](reg prometheus.Registerer, c *C) error {
	got, err := register(reg, *c)
	*c = got
	return err
}

// Options are the options in force, defaults filled.
func (r *Replayer) Options() Options { return r.o }

// Replay records a replay (always, dry runs too: the audit trail) and, unless
// it is a dry run, hands it to Run to publish.
func (r *Replayer) Replay(ctx context.Context, requestedBy string, req apiclient.ReplayRequest) (store.Replay, error) {
	return r.replay(ctx, uuid.NewString(), requestedBy, req)
}

// replay is Replay under a given id (the re-drive knows it before the start).
func (r *Replayer) replay(ctx context.Context, id, requestedBy string, req apiclient.ReplayRequest) (store.Replay, error) {
	if err := r.normalizeReplay(&req); err != nil {
		return store.Replay{}, err
	}
	if req.AdmitReplayedBodies && requestedBy == RedriveRequester {
		// The re-drive replays what it finds missing, unattended: what the
		// guard refused is never its to admit.
		return store.Replay{}, badRequest("admit_replayed_bodies: not for %s replays", RedriveRequester)
	}
	p, err := r.planReplay(ctx, id, req)
	if err != nil {
		return store.Replay{}, err
	}
	sel, err := json.Marshal(req.Selector)
	if err != nil {
		return store.Replay{}, err
	}
	return r.record(ctx, store.Replay{ID: id, RequestedBy: requestedBy, Selector: sel, Mode: string(req.Mode),
		Reason: req.Reason, DryRun: *req.DryRun, Rate: req.Rate, AdmitReplayedBodies: req.AdmitReplayedBodies}, p)
}

// Redeliver records a redelivery and, unless it is a dry run, hands it to
// Run to publish.
func (r *Replayer) Redeliver(ctx context.Context, requestedBy string, req apiclient.RedeliveryRequest) (store.Replay, error) {
	if err := r.normalizeRedelivery(&req); err != nil {
		return store.Replay{}, err
	}
	if d, ok := r.destination(req.Destination); ok && !*req.DryRun {
		// The copies go to the destination's consumer, which takes new
		// messages from its creation on: without it they would wait unseen.
		if _, err := r.backlog(ctx, d); errors.Is(err, jetstream.ErrConsumerNotFound) {
			return store.Replay{}, badRequest("destination: %s has no consumer yet: start a dispatcher with it in its config first", d.Name)
		}
	}
	id := uuid.NewString()
	p, err := r.planRedelivery(ctx, id, req)
	if err != nil {
		return store.Replay{}, err
	}
	sel, err := json.Marshal(recordedRedelivery{Source: req.Source, Destination: req.Destination, RedeliverySelector: req.Selector})
	if err != nil {
		return store.Replay{}, err
	}
	return r.record(ctx, store.Replay{ID: id, RequestedBy: requestedBy, Selector: sel, Mode: store.ReplayRedeliver,
		Reason: req.Reason, DryRun: *req.DryRun, Rate: req.Rate}, p)
}

// maxUnknownKeys bounds the unknown keys an answer names.
const maxUnknownKeys = 100

func (r *Replayer) record(ctx context.Context, rep store.Replay, p *plan) (store.Replay, error) {
	rep.Matched = int64(len(p.items))
	rep.Outcomes, rep.Counts, rep.Sample = p.summary()
	for _, k := range p.unknown[:min(len(p.unknown), maxUnknownKeys)] {
		rep.UnknownKeys = append(rep.UnknownKeys, k.String())
	}
	rep.ResumeFromSeq = p.lastSeq
	items := p.items
	publishable := 0
	for _, it := range items {
		if it.Outcome != Missing {
			publishable++
		}
	}
	rep.State = store.ReplayRunning
	switch {
	case rep.DryRun || publishable == 0:
		now := time.Now()
		rep.State, rep.FinishedAt = store.ReplayDone, &now
	case r.needsApproval(rep.Mode, publishable):
		rep.State = store.ReplayAwaitingApproval
	}
	if rep.DryRun {
		items = nil
	}
	cctx := ctx
	if rep.RequestedBy == RedriveRequester {
		// Bounded like the pass's other calls: a re-drive replay has at
		// most maxMissingListed items. An operator's may have a million,
		// on a request the operator can end.
		var cancel context.CancelFunc
		cctx, cancel = pgBound(ctx)
		defer cancel()
	}
	if err := r.o.Store.CreateReplay(cctx, &rep, items); err != nil {
		return store.Replay{}, err
	}
	r.o.Log.Info("replay recorded", "replay_id", rep.ID, "mode", rep.Mode, "dry_run", rep.DryRun, "requested_by", rep.RequestedBy,
		"matched", rep.Matched, "reason", rep.Reason, "state", rep.State)
	if rep.State == store.ReplayRunning {
		r.wakeUp()
	}
	return rep, nil
}

// needsApproval: a re-execution that would publish more events than
// Options.ReexecuteApprovalAbove waits for a second operator.
func (r *Replayer) needsApproval(mode string, publishable int) bool {
	return mode == string(inbox.ReplayReexecute) && r.o.ReexecuteApprovalAbove >= 0 && publishable > r.o.ReexecuteApprovalAbove
}

// Approve sets a replay awaiting approval running, approved by by, which
// must not be its requester (store.ErrSameOperator). changed is false when
// it awaits no approval.
func (r *Replayer) Approve(ctx context.Context, id, by string) (store.Replay, bool, error) {
	rep, changed, err := r.o.Store.ApproveReplay(ctx, id, by)
	if err != nil || !changed {
		return rep, false, err
	}
	r.o.Log.Info("replay approved", "replay_id", id, "mode", rep.Mode, "requested_by", rep.RequestedBy, "approved_by", by,
		"matched", rep.Matched, "reason", rep.Reason)
	r.wakeUp()
	return rep, true, nil
}

// Cancel stops a running replay, or one awaiting approval: recorded as
// cancelled at once, publishing stops at the next batch (whichever replayer
// publishes it).
func (r *Replayer) Cancel(ctx context.Context, id, by string) (store.Replay, bool, error) {
	rep, changed, err := r.o.Store.CancelReplay(ctx, id, by)
	if err != nil {
		return rep, false, err
	}
	if changed {
		r.o.Log.Info("replay cancelled", "replay_id", id, "by", by, "published", rep.Published)
	}
	return rep, changed, nil
}

func (r *Replayer) wakeUp() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run publishes replays until ctx ends: the ones created here, and any
// running replay whose replayer stopped (checked at start and every
// ResumeInterval). On shutdown it stops issuing publishes, waits for the
// PubAcks in flight, records them and returns; the replays stay running for
// the next replayer. Beside publishing it checks for gaps (CheckGaps), watches
// which Postgres server answers, and re-drives events whose commit was lost
// (RedrivePass) unless RedriveInterval is negative. Tests inject faults
// through ctx (internal/faults: AfterPublish).
func (r *Replayer) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { r.watchGaps(ctx) })
	wg.Go(func() { r.watchStats(ctx) })
	wg.Go(func() {
		store.ServerWatcher{Store: r.o.Store, Interval: r.o.ServerWatchInterval, OnChange: r.serverChanged}.Run(ctx)
	})
	if r.o.RedriveInterval > 0 {
		wg.Go(func() { r.watchRedrive(ctx) })
	}
	tick := time.NewTicker(r.o.ResumeInterval)
	defer tick.Stop()
	for {
		if err := r.startRunnable(ctx, &wg); err != nil && ctx.Err() == nil {
			r.o.Log.Warn("replayer: looking for running replays failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-tick.C:
		}
	}
}

func (r *Replayer) startRunnable(ctx context.Context, wg *sync.WaitGroup) error {
	// Bounded: a Postgres that hangs must not stop this loop for good.
	lctx, cancel := context.WithTimeout(ctx, store.ReplayLockTimeout)
	ids, err := r.o.Store.RunningReplays(lctx)
	cancel()
	if err != nil {
		return err
	}
	for _, id := range ids {
		r.mu.Lock()
		_, mine := r.running[id]
		full := len(r.running) >= r.o.MaxRunning
		r.mu.Unlock()
		if mine {
			continue
		}
		if full {
			return nil
		}
		lock, err := r.o.Store.LockReplay(ctx, id)
		if err != nil {
			return err
		}
		if lock == nil {
			continue // another replayer publishes it
		}
		rctx, cancel := context.WithCancel(ctx)
		r.mu.Lock()
		r.running[id] = cancel
		r.mu.Unlock()
		r.metrics.running.Inc()
		wg.Go(func() {
			ended := r.publish(rctx, lock)
			lock.Release()
			cancel()
			r.mu.Lock()
			delete(r.running, id)
			r.mu.Unlock()
			r.metrics.running.Dec()
			if ended || (rctx.Err() != nil && ctx.Err() == nil) {
				r.wakeUp() // a queued replay may start now; a paused one waits for the next round
			}
		})
	}
	return nil
}

// stopLocal cancels the local publishing of a replay, if any.
func (r *Replayer) stopLocal(id string) {
	r.mu.Lock()
	cancel := r.running[id]
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// streamOf is the stream a replay's copies go to.
func streamOf(mode string) string {
	if mode == store.ReplayRedeliver {
		return envelope.StreamOut
	}
	return envelope.StreamIn
}
