package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/store"
)

// The system stage's floor (issue 35): what the deployed pipeline's parts
// cost per event with none of Intake's own work, measured on the system's
// own NATS server and Postgres cluster once the pipeline has drained and
// sits idle. An event as deployed is, at the least, an HTTP request served
// (reference a', measured before the system), a JetStream publish awaited
// (b'), the processor's JetStream work — a fetch, a publish to an
// INTAKE_OUT-like stream, its PubAck, an ack (e') — and the processor's
// Postgres writes, batched (c'). Each is run by this process against the
// system's servers, so its CPU is this process's (the clients, as ingress
// and the processor are clients) plus the server's: the dev process's (its
// embedded NATS) for b' and e', less what the idle pipeline spends on its
// own (measured first), and every Postgres process's for c'. The sum is a
// floor: Intake's own per-event work is the system's CPU less it.

// floorCosts is the floor's parts, CPU per event.
type floorCosts struct {
	publish, natsHalf, pgWrites time.Duration
	pgServer                    time.Duration // Postgres's part of pgWrites
	claims                      time.Duration // the inbox claims alone, client and Postgres
	idle                        time.Duration // the idle dev process's CPU per second, subtracted
}

func (f floorCosts) sum(bare time.Duration) time.Duration {
	return bare + f.publish + f.natsHalf + f.pgWrites
}

// measureFloor runs b', e' and c' on sys for about dur each.
func measureFloor(ctx context.Context, c Config, sys *system, size int, dur time.Duration) (floorCosts, error) {
	var f floorCosts
	idleFor := min(2*time.Second, dur)
	d0 := sys.dev.cpu()
	time.Sleep(idleFor)
	f.idle = (sys.dev.cpu() - d0) * time.Second / idleFor

	nc, err := nats.Connect(sys.natsURL)
	if err != nil {
		return f, fmt.Errorf("floor: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return f, err
	}
	body := newRequests("", provider.Config{}, size, "floor").body("floor")
	subj, err := rawStream(ctx, js, size)
	if err != nil {
		return f, fmt.Errorf("floor: %w", err)
	}
	defer func() {
		_ = js.DeleteStream(context.WithoutCancel(ctx), rawStreamName(size))
		_ = js.DeleteStream(context.WithoutCancel(ctx), natsHalfOutName(size))
	}()

	// b': publishers as many as the generator's connections, each awaiting
	// its PubAck, as ingress's requests do.
	if f.publish, err = f.natsCost(sys, js, rawStreamName(size), func() error {
		_, err := publishSync(ctx, js, subj, body, c.Connections, dur)
		return err
	}); err != nil {
		return f, fmt.Errorf("floor (b'): %w", err)
	}
	// e': half as long, on b's backlog, at the processor's defaults. On a
	// busy machine b' may have stored less than e' drains in that time: e'
	// then ends with the backlog, its messages counted all the same.
	pc := config.Processor{}.WithDefaults()
	if f.natsHalf, err = f.natsCost(sys, js, natsHalfOutName(size), func() error {
		_, err := natsHalf(ctx, js, rawStreamName(size), size, pc.BatchSize, pc.Concurrency, dur/2)
		if errors.Is(err, errBacklogRanOut) {
			return nil
		}
		return err
	}); err != nil {
		return f, fmt.Errorf("floor (e'): %w", err)
	}

	// c': in a database of its own in the system's cluster, so the idle
	// pipeline's relay never sees its rows.
	db := fmt.Sprintf("floor_%d_%d", size, time.Now().UnixNano())
	if err := createDB(ctx, sys.adminURL(), db); err != nil {
		return f, fmt.Errorf("floor (c'): %w", err)
	}
	dbURL := sys.dbURLOf(db)
	if err := store.Migrate(ctx, dbURL, nil); err != nil {
		return f, fmt.Errorf("floor (c'): %w", err)
	}
	st, err := store.Open(ctx, dbURL, 4)
	if err != nil {
		return f, fmt.Errorf("floor (c'): %w", err)
	}
	defer st.Close()
	if f.pgWrites, f.pgServer, err = pgCost(ctx, sys, st, body, dur, false); err != nil {
		return f, err
	}
	if f.claims, _, err = pgCost(ctx, sys, st, body, dur/2, true); err != nil {
		return f, err
	}
	return f, nil
}

// pgCost runs c' (or, claimsOnly, its inbox claims alone) for dur and
// returns its CPU per event, this process's and Postgres's, and
// Postgres's alone.
func pgCost(ctx context.Context, sys *system, st *store.Store, body []byte, dur time.Duration, claimsOnly bool) (all, server time.Duration, err error) {
	pc := config.Processor{}.WithDefaults()
	self0, pg0 := pidCPU(os.Getpid()), mustPG(sys)
	r, err := pgWrites(ctx, st, body, pc.BatchSize, pc.Concurrency, dur, fmt.Sprintf("floor%t", claimsOnly), claimsOnly)
	if err != nil {
		return 0, 0, fmt.Errorf("floor (c'): %w", err)
	}
	pg1 := mustPG(sys)
	if pg0 < 0 || pg1 < 0 || r.events == 0 {
		return 0, 0, errors.New("floor (c'): no Postgres CPU or no event written")
	}
	n := time.Duration(r.events)
	return (pidCPU(os.Getpid()) - self0 + pg1 - pg0) / n, (pg1 - pg0) / n, nil
}

// natsCost runs run and returns this process's CPU and the dev process's
// (less its idle rate over the same time) per message that run stored in
// the stream named counted.
func (f floorCosts) natsCost(sys *system, js jetstream.JetStream, counted string, run func() error) (time.Duration, error) {
	start, self0, dev0 := time.Now(), pidCPU(os.Getpid()), sys.dev.cpu()
	if err := run(); err != nil {
		return 0, err
	}
	spent := pidCPU(os.Getpid()) - self0 + sys.dev.cpu() - dev0
	spent -= time.Duration(float64(f.idle) * time.Since(start).Seconds())
	st, err := js.Stream(context.Background(), counted)
	if err != nil {
		return 0, err
	}
	info, err := st.Info(context.Background())
	if err != nil {
		return 0, err
	}
	if info.State.Msgs == 0 {
		return 0, errors.New("no message went through")
	}
	return max(spent, 0) / time.Duration(info.State.Msgs), nil
}

// mustPG is every Postgres process's CPU so far, -1 when unreadable.
func mustPG(sys *system) time.Duration {
	t, err := postgresCPU(sys.pg)
	if err != nil {
		return -1
	}
	return t
}
