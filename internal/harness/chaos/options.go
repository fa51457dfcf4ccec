package chaos

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Options configure a run. The zero value of every field but Binary means
// its default.
type Options struct {
	// Binary is the intake binary every child process runs (`intake bench
	// chaos` uses its own executable; the test builds one). Required.
	Binary string
	// Dir is the run directory: config, logs, NATS stores, Postgres data.
	// Defaults to a new temp directory, removed after a passing run.
	Dir string
	// Keep keeps Dir after a passing run too (a failing run always keeps it).
	Keep bool

	// Events is the number of distinct logical events. Defaults to 10,000.
	Events int
	// Rate paces the load generator: events started per second. Faults are
	// scheduled by progress, so a slower rate spreads the same faults over
	// a longer run. Defaults to 200.
	Rate float64
	// InFlight bounds events being delivered at once (retries included).
	// Defaults to 128.
	InFlight int

	// Ingress and Processors are how many processes of each role run.
	// Default to 2; at least 2 (deliveries go to different ingresses, kills
	// leave another processor).
	Ingress    int
	Processors int
	// Cluster runs a 3-node NATS cluster with R3 streams and kills the
	// INTAKE_IN stream leader mid-run, instead of one node that is killed
	// and restarted.
	Cluster bool

	// Failover runs Postgres as a primary and a streaming standby (two
	// servers) that every role and the harness reach through one multi-host
	// URL, and turns the Postgres fault into a failover: the standby is
	// cut off, the primary killed with SIGKILL, the standby promoted; later
	// the old primary rejoins as a standby of the new one. An `intake
	// replayer` runs too, for the re-drive of events whose commit was lost
	// with the primary. Defaults to false: one server, stopped and started.
	Failover bool
	// Async replicates asynchronously: commits the primary acknowledged
	// can be lost with it, and only the re-drive brings their events back.
	// Defaults to false: synchronous replication, where a commit waiting
	// for the cut-off standby has an unknown outcome when the primary dies.
	// Requires Failover.
	Async bool
	// NoCut kills the primary with the standby still connected (no cut),
	// its walreceiver paused for the last 500ms and resumed after the kill:
	// the commits of the pause reach the standby while their clients see
	// only the connection drop; the retry on the new primary finds their
	// rows and the inbox answers Redelivered, which the run counts
	// (Result.RedeliveredAtKill).
	// Defaults to false: the standby is cut off first. Requires Failover
	// and synchronous replication.
	NoCut bool

	// Partition runs the hanging-partition scenarios instead of kills and
	// restarts (partition.go): processors ↔ Postgres blackholed for
	// PartitionPostgres, then ingress ↔ NATS for PartitionNATS, through
	// fault proxies. With Control, its negative control. Defaults to false.
	Partition bool
	// PartitionPostgres and PartitionNATS are how long each partition
	// lasts. Default to 45s and 30s.
	PartitionPostgres time.Duration
	PartitionNATS     time.Duration

	// Control runs the negative control: the processors write the business
	// row outside the inbox transaction (EffectsOutsideTx), so the verdict
	// must find duplicate effects. Defaults to false.
	Control bool
	// Handler is what writes the business row: HandlerGo, the harness's Go
	// handler (Effects), or HandlerSQL, a SQL handler in the run's config
	// (EffectsSQL) that the stock processor loads, as a user without Go
	// would run one. Defaults to HandlerGo.
	Handler string

	// ProcessorKills is how many times a processor is killed with SIGKILL
	// (half of them between a commit and its acks). Defaults to 6; negative
	// means none.
	ProcessorKills int
	// NoNATSFault turns off the NATS fault: kill -9 and restart of the node
	// (of the INTAKE_IN stream leader in a cluster). NoPostgresFault turns
	// off the Postgres fault: a stop and start, or with Failover the
	// failover and the old primary's rejoin.
	NoNATSFault     bool
	NoPostgresFault bool
	// DuplicateWindow is the JetStream dedup window, short so that late
	// deliveries can only be caught by the inbox. Defaults to 2s.
	DuplicateWindow time.Duration
	// AckWait is the processor consumer's ack deadline: how soon a killed
	// processor's messages are redelivered. Defaults to 5s.
	AckWait time.Duration

	// Shares of Events (each event has one kind): delivered 3 times instead
	// of 2 (default 0.10); delivered once more after the duplicate window
	// (default 0.05); followed by a same-id-different-payload delivery
	// (default 0.05); object versions published out of order (default 0.05).
	// A negative share means none.
	TripleShare   float64
	LateShare     float64
	ConflictShare float64
	OrderShare    float64
	// VersionsPerObject is how many versions each ordered object gets.
	// Defaults to 5.
	VersionsPerObject int
	// LostShare is the share of HTTP attempts whose response the client
	// never reads: it drops the connection after sending. Defaults to 0.03;
	// negative means none.
	LostShare float64

	// Seed makes the event mix, kinds and fault moments repeatable (the
	// timing of a real system is not). Defaults to the clock.
	Seed uint64
	// Timeout bounds the whole run. Defaults to 20 minutes.
	Timeout time.Duration
	// SettleTimeout bounds the wait, after load and faults, for the
	// pipeline to drain. Defaults to 3 minutes.
	SettleTimeout time.Duration

	// NATSConfig is the nats-server configuration the nodes run (users and
	// permissions; the harness adds a user of its own). Defaults to
	// deploy/nats/intake.conf, found upward from the working directory.
	NATSConfig string

	// Log receives progress lines. Defaults to discarding them.
	Log io.Writer
}

// WithDefaults returns o with every zero field set to its default.
func (o Options) WithDefaults() Options {
	setInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setF := func(v *float64, d float64) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0
		}
	}
	setD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setInt(&o.Events, 10_000)
	if o.Handler == "" {
		o.Handler = HandlerGo
	}
	setF(&o.Rate, 200)
	setInt(&o.InFlight, 128)
	setInt(&o.Ingress, 2)
	setInt(&o.Processors, 2)
	setInt(&o.ProcessorKills, 6)
	o.ProcessorKills = max(o.ProcessorKills, 0)
	setD(&o.DuplicateWindow, 2*time.Second)
	setD(&o.AckWait, 5*time.Second)
	setF(&o.TripleShare, 0.10)
	setF(&o.LateShare, 0.05)
	setF(&o.ConflictShare, 0.05)
	setF(&o.OrderShare, 0.05)
	setInt(&o.VersionsPerObject, 5)
	setF(&o.LostShare, 0.03)
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	setD(&o.Timeout, 20*time.Minute)
	setD(&o.SettleTimeout, 3*time.Minute)
	setD(&o.PartitionPostgres, 45*time.Second)
	setD(&o.PartitionNATS, 30*time.Second)
	if o.Partition { // the partitions are the run's faults
		o.ProcessorKills, o.NoNATSFault, o.NoPostgresFault = 0, true, true
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

func (o Options) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("chaos: Options.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if o.Binary == "" {
		bad("Binary", "required (the intake binary to run as child processes)")
	}
	if o.Events < 10 {
		bad("Events", "at least 10, got %d", o.Events)
	}
	if o.Rate <= 0 {
		bad("Rate", "must be positive")
	}
	if o.Ingress < 2 {
		bad("Ingress", "at least 2 (parallel deliveries go to different ingresses), got %d", o.Ingress)
	}
	if o.Processors < 2 {
		bad("Processors", "at least 2, got %d", o.Processors)
	}
	if o.AckWait < time.Second {
		bad("AckWait", "at least 1s (intake's processor.ack_wait minimum)")
	}
	for name, v := range map[string]float64{"TripleShare": o.TripleShare, "LateShare": o.LateShare,
		"ConflictShare": o.ConflictShare, "OrderShare": o.OrderShare, "LostShare": o.LostShare} {
		if v < 0 || v > 0.5 {
			bad(name, "must be within 0..0.5, got %g", v)
		}
	}
	if s := o.TripleShare + o.LateShare + o.ConflictShare + o.OrderShare; s > 0.9 {
		bad("TripleShare+LateShare+ConflictShare+OrderShare", "must leave plain events (sum %.2f > 0.9)", s)
	}
	if o.Async && !o.Failover {
		bad("Async", "requires Failover (asynchronous replication needs a standby)")
	}
	if o.NoCut && (!o.Failover || o.Async) {
		bad("NoCut", "requires Failover with synchronous replication (not Async)")
	}
	if o.Handler != HandlerGo && o.Handler != HandlerSQL {
		bad("Handler", "%q: %s or %s", o.Handler, HandlerGo, HandlerSQL)
	}
	if o.Control && o.Handler == HandlerSQL && !o.Partition {
		bad("Handler", "the negative control writes outside the transaction from Go: not with %s", HandlerSQL)
	}
	if o.Partition && (o.Cluster || o.Failover) {
		bad("Partition", "runs on one NATS node and one Postgres server (not with Cluster or Failover)")
	}
	if o.VersionsPerObject < 2 {
		bad("VersionsPerObject", "at least 2 (one object version cannot be out of order)")
	}
	return errors.Join(errs...)
}
