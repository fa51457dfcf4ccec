package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// API configures the operator API and the replayer behind it.
type API struct {
	// Tokens that may call /api/v1. Without any, the API refuses every call.
	Tokens []Token `yaml:"tokens"`
	// RedriveInterval is how often the replayer looks for events the
	// processor acknowledged whose inbox row is gone (a commit lost in a
	// Postgres failover) and replays them. Defaults to
	// DefaultRedriveInterval (1m); negative turns re-driving off.
	RedriveInterval time.Duration `yaml:"redrive_interval"`
	// RedriveLookback is how far back a re-drive pass looks at start and
	// after a failover: at least the replication lag a failover can lose.
	// Defaults to DefaultRedriveLookback (10m).
	RedriveLookback time.Duration `yaml:"redrive_lookback"`
	// StatsInterval is how often the replayer reads, for the metrics, the
	// failed and quarantined counts of the inbox and the replays' states
	// from Postgres. Defaults to DefaultStatsInterval (30s).
	StatsInterval time.Duration `yaml:"stats_interval"`
	// GapCheckInterval is how often the replayer checks INTAKE_IN for
	// messages lost behind Intake's back (GET /api/v1/gaps). Defaults to
	// DefaultGapCheckInterval (5m).
	GapCheckInterval time.Duration `yaml:"gap_check_interval"`
	// Replays bounds replays and redeliveries.
	Replays APIReplays `yaml:"replays"`
	// Reconcile bounds reconciles (GET /api/v1/reconcile).
	Reconcile APIReconcile `yaml:"reconcile"`
	// PayloadSearch bounds GET /api/v1/search, which reads payloads.
	PayloadSearch APIPayloadSearch `yaml:"payload_search"`
}

// APIPayloadSearch is api.payload_search: who may search INTAKE_IN's
// payloads by a JSON field's value, and how much one search reads.
type APIPayloadSearch struct {
	// Viewers lets viewer tokens search payloads too; operators always
	// may. Off by default: payloads may hold what a viewer should not see.
	Viewers bool `yaml:"viewers"`
	// MaxMessages bounds the messages one search reads. Defaults to
	// DefaultPayloadSearchMaxMessages (10000).
	MaxMessages int `yaml:"max_messages"`
	// MaxWindow bounds the time range one search covers. Defaults to
	// DefaultPayloadSearchMaxWindow (24h).
	MaxWindow time.Duration `yaml:"max_window"`
}

// APIReplays is api.replays: the pace and bounds of replays and
// redeliveries.
type APIReplays struct {
	// DefaultRate is the pace, in events per second, of a replay that asks
	// for none. Defaults to DefaultReplayRate (100); at most MaxRate.
	DefaultRate int `yaml:"default_rate"`
	// MaxRate caps the rate a replay may ask for. Defaults to
	// DefaultMaxReplayRate (10000).
	MaxRate int `yaml:"max_rate"`
	// MaxMatched refuses selectors matching more events (narrow them or
	// split the replay), and reconciles of ranges holding more ingress
	// messages. Defaults to DefaultMaxMatched (1000000).
	MaxMatched int `yaml:"max_matched"`
	// ReexecuteApprovalAbove: a re-execution (mode reexecute, not a dry
	// run) that would publish more events waits for a second operator's
	// approval (POST /api/v1/replays/{id}/approve) before it publishes.
	// Defaults to DefaultReexecuteApprovalAbove (1000); -1 turns approval
	// off.
	ReexecuteApprovalAbove int `yaml:"reexecute_approval_above"`
	// MaxRunning bounds the replays one replayer publishes at once; each
	// holds a database connection for its lock. Others wait their turn.
	// Defaults to DefaultMaxRunningReplays (2).
	MaxRunning int `yaml:"max_running"`
	// ResumeInterval is how often a replayer looks for running replays no
	// replayer publishes (their replayer died). Defaults to
	// DefaultResumeInterval (10s).
	ResumeInterval time.Duration `yaml:"resume_interval"`
	// PublishTimeout bounds the wait for one batch's PubAcks. Defaults to
	// DefaultReplayPublishTimeout (10s).
	PublishTimeout time.Duration `yaml:"publish_timeout"`
	// RetryFor is how long a replay keeps retrying without progress (NATS
	// unavailable, stream full) before it fails. Defaults to
	// DefaultReplayRetryFor (2m).
	RetryFor time.Duration `yaml:"retry_for"`
}

// APIReconcile is api.reconcile: the bounds of one reconcile.
type APIReconcile struct {
	// MaxSpan bounds one reconcile: it checks at most this many stream
	// messages (a wider range is refused: split it). Defaults to
	// DefaultReconcileMaxSpan (100000).
	MaxSpan int `yaml:"max_span"`
	// ViewerMaxSpan is MaxSpan for a viewer's token. Defaults to
	// DefaultReconcileViewerMaxSpan (10000), or MaxSpan when that is
	// lower; at most MaxSpan.
	ViewerMaxSpan int `yaml:"viewer_max_span"`
	// MaxRunning bounds the API reconciles one replayer runs at once (each
	// scans the stream and reads the inbox), viewers' holding at most one;
	// more get 429 with Retry-After. The re-drive runs besides. Defaults to
	// DefaultMaxReconciles (2).
	MaxRunning int `yaml:"max_running"`
}

// Defaults of the api section; the replayer's Options take the same.
const (
	DefaultRedriveInterval = time.Minute
	DefaultRedriveLookback = 10 * time.Minute
	// DefaultStatsInterval: two indexed reads twice a minute, fresh enough
	// for alerts that wait minutes.
	DefaultStatsInterval = 30 * time.Second
	// DefaultGapCheckInterval: a loss is seen within minutes, not at a
	// customer's complaint; a check is one stream info and one indexed read.
	DefaultGapCheckInterval = 5 * time.Minute

	DefaultReplayRate    = 100
	DefaultMaxReplayRate = 10_000
	DefaultMaxMatched    = 1_000_000
	// DefaultReexecuteApprovalAbove: a re-execution of more events than
	// a handful of hand-picked ones needs two people.
	DefaultReexecuteApprovalAbove = 1000
	DefaultMaxRunningReplays      = 2
	DefaultResumeInterval         = 10 * time.Second
	DefaultReplayPublishTimeout   = 10 * time.Second
	DefaultReplayRetryFor         = 2 * time.Minute

	DefaultPayloadSearchMaxMessages = 10_000
	DefaultPayloadSearchMaxWindow   = 24 * time.Hour

	DefaultReconcileMaxSpan       = 100_000
	DefaultReconcileViewerMaxSpan = 10_000
	DefaultMaxReconciles          = 2
)

// WithDefaults returns a with every unset field at its default.
func (a API) WithDefaults() API {
	setDefault(&a.RedriveInterval, DefaultRedriveInterval)
	setDefault(&a.RedriveLookback, DefaultRedriveLookback)
	setDefault(&a.StatsInterval, DefaultStatsInterval)
	setDefault(&a.GapCheckInterval, DefaultGapCheckInterval)
	a.Replays = a.Replays.WithDefaults()
	a.Reconcile = a.Reconcile.WithDefaults()
	setDefault(&a.PayloadSearch.MaxMessages, DefaultPayloadSearchMaxMessages)
	setDefault(&a.PayloadSearch.MaxWindow, DefaultPayloadSearchMaxWindow)
	return a
}

// WithDefaults returns r with every unset field at its default.
func (r APIReplays) WithDefaults() APIReplays {
	setDefault(&r.DefaultRate, DefaultReplayRate)
	setDefault(&r.MaxRate, DefaultMaxReplayRate)
	setDefault(&r.MaxMatched, DefaultMaxMatched)
	setDefault(&r.ReexecuteApprovalAbove, DefaultReexecuteApprovalAbove)
	setDefault(&r.MaxRunning, DefaultMaxRunningReplays)
	setDefault(&r.ResumeInterval, DefaultResumeInterval)
	setDefault(&r.PublishTimeout, DefaultReplayPublishTimeout)
	setDefault(&r.RetryFor, DefaultReplayRetryFor)
	return r
}

// WithDefaults returns r with every unset field at its default.
func (r APIReconcile) WithDefaults() APIReconcile {
	setDefault(&r.MaxSpan, DefaultReconcileMaxSpan)
	setDefault(&r.ViewerMaxSpan, min(DefaultReconcileViewerMaxSpan, r.MaxSpan))
	setDefault(&r.MaxRunning, DefaultMaxReconciles)
	return r
}

// TokenRole is what an API token may do: a viewer reads, an operator also
// replays. A role of the binary (ingress, processor, replayer) is another
// thing: intake.Roles.
type TokenRole string

// Token roles.
const (
	RoleViewer   TokenRole = "viewer"
	RoleOperator TokenRole = "operator"
)

// Token is one bearer token of the operator API, given either as the token
// itself or as the hex SHA-256 of it (so the config file need not hold the
// token: `printf %s "$TOKEN" | sha256sum`). Exactly one of the two.
type Token struct {
	Name        string    `yaml:"name"`
	Token       string    `yaml:"token"`
	TokenSHA256 string    `yaml:"token_sha256"`
	Role        TokenRole `yaml:"role"`
}

// Sum is the SHA-256 the API compares a presented token's digest with
// (zero when the token is invalid: Validate reports it).
func (t Token) Sum() [sha256.Size]byte {
	if t.TokenSHA256 == "" {
		return sha256.Sum256([]byte(t.Token))
	}
	var sum [sha256.Size]byte
	_, _ = hex.Decode(sum[:], []byte(t.TokenSHA256))
	return sum
}

// MinTokenLength is the shortest bearer token api.tokens accepts.
const MinTokenLength = 16

// Validate checks the section; errors name the YAML field.
func (a API) Validate() error {
	var p problems
	for _, d := range []struct {
		field string
		d     time.Duration
	}{{"api.redrive_lookback", a.RedriveLookback}, {"api.stats_interval", a.StatsInterval},
		{"api.gap_check_interval", a.GapCheckInterval}, {"api.payload_search.max_window", a.PayloadSearch.MaxWindow}} {
		if d.d <= 0 {
			p.add(d.field, "must be positive, got %s", d.d)
		}
	}
	if a.PayloadSearch.MaxMessages <= 0 {
		p.add("api.payload_search.max_messages", "must be positive, got %d", a.PayloadSearch.MaxMessages)
	}
	p.also(a.Replays.validate())
	p.also(a.Reconcile.validate())
	seen := map[[sha256.Size]byte]bool{}
	for i, t := range a.Tokens {
		f := fmt.Sprintf("api.tokens[%d]", i)
		if t.Name == "" {
			p.add(f+".name", "required")
		}
		valid := false
		switch {
		case t.Token != "" && t.TokenSHA256 != "":
			p.add(f, "give token or token_sha256, not both")
		case t.TokenSHA256 != "":
			if b, err := hex.DecodeString(t.TokenSHA256); err != nil || len(b) != sha256.Size {
				p.add(f+".token_sha256", "must be %d hex digits (a SHA-256)", 2*sha256.Size)
			} else {
				valid = true
			}
		case len(t.Token) < MinTokenLength:
			p.add(f+".token", "must be at least %d characters (or give token_sha256)", MinTokenLength)
		default:
			valid = true
		}
		if sum := t.Sum(); valid && seen[sum] {
			p.add(f, "duplicates another token")
		} else if valid {
			seen[sum] = true
		}
		if t.Role != RoleViewer && t.Role != RoleOperator {
			p.add(f+".role", "must be viewer or operator, got %q", t.Role)
		}
	}
	return p.err()
}

func (r APIReplays) validate() error {
	var p problems
	if r.MaxRate < 1 {
		p.add("api.replays.max_rate", "must be at least 1, got %d", r.MaxRate)
	}
	if r.DefaultRate < 1 || r.DefaultRate > r.MaxRate {
		p.add("api.replays.default_rate", "must be 1..api.replays.max_rate (%d), got %d", r.MaxRate, r.DefaultRate)
	}
	if r.MaxMatched < 1 {
		p.add("api.replays.max_matched", "must be at least 1, got %d", r.MaxMatched)
	}
	if r.ReexecuteApprovalAbove < -1 {
		p.add("api.replays.reexecute_approval_above", "must be a count of events, or -1 (no approval), got %d", r.ReexecuteApprovalAbove)
	}
	if r.MaxRunning < 1 {
		p.add("api.replays.max_running", "must be at least 1, got %d", r.MaxRunning)
	}
	for _, d := range []struct {
		field string
		d     time.Duration
	}{{"api.replays.resume_interval", r.ResumeInterval}, {"api.replays.publish_timeout", r.PublishTimeout},
		{"api.replays.retry_for", r.RetryFor}} {
		if d.d <= 0 {
			p.add(d.field, "must be positive, got %s", d.d)
		}
	}
	return p.err()
}

func (r APIReconcile) validate() error {
	var p problems
	if r.MaxSpan < 1 {
		p.add("api.reconcile.max_span", "must be at least 1, got %d", r.MaxSpan)
	}
	if r.ViewerMaxSpan < 1 || r.ViewerMaxSpan > r.MaxSpan {
		p.add("api.reconcile.viewer_max_span", "must be 1..api.reconcile.max_span (%d), got %d", r.MaxSpan, r.ViewerMaxSpan)
	}
	if r.MaxRunning < 1 {
		p.add("api.reconcile.max_running", "must be at least 1, got %d", r.MaxRunning)
	}
	return p.err()
}
