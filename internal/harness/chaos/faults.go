package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/intakehq/intake/pkg/envelope"
)

// FaultRecord is one fault as it happened.
type FaultRecord struct {
	At       time.Duration // since the run started
	Progress float64       // share of events started when it fired
	What     string
	Took     time.Duration // from the fault until the piece served again
}

type faultKind int

const (
	faultKill faultKind = iota
	faultNATS
	faultPostgres          // a stop and start, or with Failover the failover
	faultRejoin            // Failover: the old primary rejoins as a standby
	faultPartitionPostgres // Partition: processors ↔ Postgres blackholed
	faultPartitionNATS     // Partition: ingress ↔ NATS blackholed
)

type plannedFault struct {
	at     float64 // progress (share of events started) that triggers it
	kind   faultKind
	proc   int  // faultKill: which processor
	commit bool // faultKill: between a commit and its acks
}

// faults injects the planned faults one after another as the load
// progresses. Triggering by progress rather than by time keeps every fault
// inside the load whatever the machine's speed.
type faults struct {
	h    *harness
	ld   *load
	plan []plannedFault

	mu         sync.Mutex // the two lanes share what follows
	rng        *rand.Rand
	log        []FaultRecord
	kills      int
	natsFaults int
	pgFaults   int
	pgRejoins  int
	// The failover (Failover): when the standby was cut off, how many
	// bytes of WAL the primary wrote until its kill (-1: unknown), when
	// the standby was promoted.
	cutAt       time.Time
	walAfterCut int64
	promotedAt  time.Time
	// NoCut: redelivered outcomes on the processors from the kill until
	// they committed on the new primary (-1: not read), on how many
	// processors, and whether no processor kill could have added some.
	redeliveredAtKill int
	redeliveredProcs  int
	redeliveredClean  bool
	killTimes         []time.Time
}

func newFaults(h *harness, ld *load) *faults {
	o := h.o
	rng := rand.New(rand.NewPCG(o.Seed, 0xfa17))
	f := &faults{h: h, ld: ld, rng: rng, walAfterCut: -1, redeliveredAtKill: -1}
	for i := range o.ProcessorKills {
		f.plan = append(f.plan, plannedFault{
			at: 0.05 + 0.85*rng.Float64(), kind: faultKill, proc: rng.IntN(o.Processors), commit: i%2 == 1,
		})
	}
	if !o.NoNATSFault {
		f.plan = append(f.plan, plannedFault{at: 0.25 + 0.1*rng.Float64(), kind: faultNATS})
	}
	if !o.NoPostgresFault {
		f.plan = append(f.plan, plannedFault{at: 0.55 + 0.1*rng.Float64(), kind: faultPostgres})
		if o.Failover {
			f.plan = append(f.plan, plannedFault{at: 0.8 + 0.05*rng.Float64(), kind: faultRejoin})
		}
	}
	if o.Partition {
		f.plan = append(f.plan, plannedFault{at: 0.1, kind: faultPartitionPostgres}, plannedFault{at: 0.6, kind: faultPartitionNATS})
	}
	slices.SortFunc(f.plan, func(a, b plannedFault) int { return cmp.Compare(a.at, b.at) })
	return f
}

func (f *faults) describe() string {
	o := f.h.o
	s := fmt.Sprintf("%d processor kills (kill -9; half between commit and ack)", o.ProcessorKills)
	if !o.NoNATSFault {
		if o.Cluster {
			s += ", kill -9 of the INTAKE_IN stream leader then its restart"
		} else {
			s += ", NATS kill -9 and restart"
		}
	}
	switch {
	case o.NoPostgresFault:
	case o.Failover && o.NoCut:
		s += fmt.Sprintf(", Postgres failover (%s replication, no cut: primary kill -9 with the standby connected, standby promoted), then the old primary rejoins as a standby (pg_rewind)",
			f.h.replication())
	case o.Failover:
		s += fmt.Sprintf(", Postgres failover (%s replication: standby cut off %s, primary kill -9, standby promoted), then the old primary rejoins as a standby (pg_rewind)",
			f.h.replication(), standbyCut)
	default:
		s += ", Postgres stop and start"
	}
	if o.Partition {
		s += fmt.Sprintf(", partitions (blackholed, never closed): processors ↔ Postgres %s, then ingress ↔ NATS %s",
			o.PartitionPostgres, o.PartitionNATS)
	}
	return s + fmt.Sprintf(", %.0f%% of responses dropped", 100*o.LostShare)
}

// run injects the plan on two lanes, each in order: processor kills on
// one, the NATS and Postgres faults on the other, so that a slow recovery
// (a leader election) does not push the kills to the end of the load.
func (f *faults) run(ctx context.Context) error {
	var kills, infra []plannedFault
	for _, p := range f.plan {
		if p.kind == faultKill {
			kills = append(kills, p)
		} else {
			infra = append(infra, p)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, lane := range [][]plannedFault{kills, infra} {
		wg.Go(func() { errs[i] = f.runLane(ctx, lane) })
	}
	wg.Wait()
	slices.SortFunc(f.log, func(a, b FaultRecord) int { return cmp.Compare(a.At, b.At) })
	return errors.Join(errs...)
}

func (f *faults) runLane(ctx context.Context, lane []plannedFault) error {
	for _, p := range lane {
		if err := f.waitFor(ctx, p.at); err != nil {
			return err
		}
		var err error
		switch p.kind {
		case faultKill:
			err = f.killProcessor(ctx, p)
		case faultNATS:
			err = f.natsFault(ctx)
		case faultPostgres:
			if f.h.o.Failover {
				err = f.failover(ctx)
			} else {
				err = f.postgresFault(ctx)
			}
		case faultRejoin:
			err = f.rejoin(ctx)
		case faultPartitionPostgres:
			err = f.partitionFault(ctx, "processors ↔ Postgres", f.h.part.pg, f.h.o.PartitionPostgres, f.h.procs)
		case faultPartitionNATS:
			err = f.partitionFault(ctx, "ingress ↔ NATS", f.h.part.nats, f.h.o.PartitionNATS, f.h.ingress)
		}
		if err != nil {
			return fmt.Errorf("fault: %w", err)
		}
	}
	return nil
}

func (f *faults) progress() float64 {
	return float64(f.ld.dispatched.Load()) / float64(len(f.ld.events))
}

func (f *faults) waitFor(ctx context.Context, at float64) error {
	return poll(ctx, 20*time.Millisecond, func() error {
		if f.progress() < at {
			return fmt.Errorf("progress %.2f < %.2f", f.progress(), at)
		}
		return nil
	})
}

func (f *faults) record(start time.Time, progress float64, what string) {
	r := FaultRecord{At: start.Sub(f.h.start), Progress: progress, What: what, Took: time.Since(start)}
	f.mu.Lock()
	f.log = append(f.log, r)
	f.mu.Unlock()
	f.h.logf("fault at %.0f%%: %s (back in %s)", 100*progress, what, r.Took.Round(10*time.Millisecond))
}

func (f *faults) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// killProcessor kills one processor with SIGKILL — at a random moment, or
// (commit) right after its next commit, before the acks — and starts it
// again after a short pause.
func (f *faults) killProcessor(ctx context.Context, p plannedFault) error {
	c := f.h.procs[p.proc]
	for i := 1; !c.Running() && i < len(f.h.procs); i++ {
		c = f.h.procs[(p.proc+i)%len(f.h.procs)]
	}
	start, progress := time.Now(), f.progress()
	what := "kill -9 " + c.name
	if p.commit && CrashSignal != nil {
		if err := c.Signal(CrashSignal, true); err != nil {
			return err
		}
		if c.Exited(5 * time.Second) {
			what += " between a commit and its acks"
		} else {
			if err := c.Kill(); err != nil {
				return err
			}
			what += " (no commit within 5s, so at once)"
		}
	} else if err := c.Kill(); err != nil {
		return err
	}
	f.mu.Lock()
	f.kills++
	f.killTimes = append(f.killTimes, time.Now())
	pause := 200*time.Millisecond + time.Duration(f.rng.Int64N(int64(1300*time.Millisecond)))
	f.mu.Unlock()
	f.sleep(ctx, pause)
	if err := f.h.restart(ctx, c); err != nil {
		return err
	}
	f.record(start, progress, fmt.Sprintf("%s, restarted after %s", what, pause.Round(time.Millisecond)))
	return nil
}

// natsFault kills the single NATS node with SIGKILL and starts it again on
// the same store; in a cluster it kills the INTAKE_IN stream leader, lets
// the others elect a new one, and starts the old leader again.
func (f *faults) natsFault(ctx context.Context) error {
	h := f.h
	start, progress := time.Now(), f.progress()
	node := h.nats[0]
	what := "kill -9 nats (single node), restart on the same store"
	if h.o.Cluster {
		leader, err := f.streamLeader(ctx)
		if err != nil {
			return err
		}
		for _, n := range h.nats {
			if n.name == leader {
				node = n
			}
		}
		what = fmt.Sprintf("kill -9 the INTAKE_IN stream leader %s", leader)
	}
	if err := node.Kill(); err != nil {
		return err
	}
	f.mu.Lock()
	f.natsFaults++
	f.mu.Unlock()
	if h.o.Cluster {
		// The survivors elect a new leader while the old one is down.
		wait, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := poll(wait, 100*time.Millisecond, func() error {
			l, err := f.streamLeader(wait)
			if err == nil && (l == "" || l == node.name) {
				return fmt.Errorf("no new leader yet")
			}
			if err == nil {
				what += ", new leader " + l
			}
			return err
		})
		cancel()
		if err != nil {
			return fmt.Errorf("no new INTAKE_IN leader after killing %s: %w", node.name, err)
		}
		f.sleep(ctx, time.Second)
	} else {
		f.sleep(ctx, time.Second)
	}
	if err := node.Start(ctx); err != nil {
		return err
	}
	if err := h.jetStreamReady(ctx, time.Minute); err != nil {
		return err
	}
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := f.streamLeader(wait); err != nil {
		return err
	}
	f.record(start, progress, what+", restarted "+node.name)
	return nil
}

func (f *faults) streamLeader(ctx context.Context) (string, error) {
	var leader string
	err := poll(ctx, 100*time.Millisecond, func() error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		s, err := f.h.js.Stream(cctx, envelope.StreamIn)
		if err != nil {
			return err
		}
		info, err := s.Info(cctx)
		if err != nil {
			return err
		}
		if info.Cluster != nil {
			leader = info.Cluster.Leader
		}
		return nil
	})
	return leader, err
}

// postgresFault stops Postgres (fast shutdown: sessions cut, open
// transactions rolled back) and starts it again: a database failover as
// the processors see it.
func (f *faults) postgresFault(ctx context.Context) error {
	start, progress := time.Now(), f.progress()
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := f.h.pg.Stop(stopCtx); err != nil {
		return err
	}
	f.mu.Lock()
	f.pgFaults++
	f.mu.Unlock()
	f.sleep(ctx, 1500*time.Millisecond)
	if err := f.h.pg.Start(ctx); err != nil {
		return err
	}
	f.record(start, progress, "postgres stopped (fast shutdown), down 1.5s, started again")
	return nil
}
