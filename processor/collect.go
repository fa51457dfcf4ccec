package processor

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// batch is what the collector hands a worker: messages taken from the pull,
// kept in progress from the moment the batch was formed. The worker calls
// settled once every message is acked, nak'd or terminated.
type batch struct {
	msgs    []jetstream.Msg
	settled func()
}

// collector forms the processor's batches from its pull. A message JetStream
// delivered counts against its ack deadline from then on, so none may wait
// unattended while the database is away: a formed batch is kept in progress
// until a worker has settled it, and while the workers wait out an outage
// the collector stops the pull and takes what nats.go had prefetched into
// held batches, kept in progress too. It pulls again once the database
// commits. What one processor holds unacked stays within
// batch_size × (2 × concurrency + 1) (docs/scaling.md): the workers'
// batches, the one formed, and the prefetch.
type collector struct {
	// ctx's end drains the pull; what was taken is still handed out.
	ctx context.Context
	// open starts a pull; run calls it again after an outage.
	open       func() (jetstream.MessagesContext, error)
	size       int
	wait       time.Duration
	out        chan<- batch
	outage     *outage
	inProgress func([]jetstream.Msg) (stop func())
}

// run collects from it, the pull already open, until a pull ends other
// than by the collector's own stop (ctx's end, the consumer gone, the
// connection closed), and returns that pull's error once every batch it
// took is handed out.
func (c *collector) run(it jetstream.MessagesContext) error {
	for {
		held, err := c.pull(it)
		it.Stop()
		for _, b := range held {
			c.out <- b
		}
		if err != nil {
			return err
		}
		// Stopped for an outage: pull again once the database commits.
		select {
		case <-c.outage.over():
		case <-c.ctx.Done():
			return jetstream.ErrMsgIteratorClosed
		}
		if it, err = c.open(); err != nil {
			return err
		}
	}
}

// pull hands out batches from it until it closes. When no worker can take
// a batch because they wait out the database, it drains it (no more
// messages come) and returns the batches it formed from what was left,
// with a nil error.
func (c *collector) pull(it jetstream.MessagesContext) (held []batch, err error) {
	stop := context.AfterFunc(c.ctx, it.Drain)
	defer stop()
	draining := false
	for {
		msgs, err := formBatch(it, c.size, c.wait)
		if len(msgs) > 0 {
			b := batch{msgs: msgs, settled: c.inProgress(msgs)}
			if draining || !c.handOut(b) {
				held = append(held, hold(b))
			}
			if !draining && len(held) > 0 {
				// nats.go's buffer holds what the pull prefetched, its
				// deadlines running: stop the pull and take it all.
				draining = true
				it.Drain()
			}
		}
		if err != nil {
			if draining && !c.stopping() && errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return held, nil
			}
			return held, err
		}
	}
}

// handOut gives b to a worker, unless the workers wait out the database
// first: then it returns false and b is the caller's to hold.
func (c *collector) handOut(b batch) bool {
	select {
	case c.out <- b:
		return true
	default: // no worker free: is it an outage?
	}
	select {
	case c.out <- b:
		return true
	case <-c.outage.begun():
		return false
	}
}

// hold extends b's deadlines at once: its messages may have waited in the
// buffer since their delivery, and the first keep-alive is a third of the
// ack wait away.
func hold(b batch) batch {
	for _, m := range b.msgs {
		_ = m.InProgress()
	}
	return b
}

func (c *collector) stopping() bool { return c.ctx.Err() != nil }

// collect groups messages into batches (formBatch) until the iterator
// closes. The receipt folder's loop: receipts never run out of deliveries.
func collect(it jetstream.MessagesContext, size int, wait time.Duration, out chan<- []jetstream.Msg) error {
	for {
		batch, err := formBatch(it, size, wait)
		if len(batch) > 0 {
			out <- batch
		}
		if err != nil {
			return err
		}
	}
}

// formBatch takes one batch from it: up to size messages, or whatever came
// within wait of the first one. With an error it returns what it took
// before the iterator closed (maybe nothing).
func formBatch(it jetstream.MessagesContext, size int, wait time.Duration) ([]jetstream.Msg, error) {
	first, err := it.Next()
	if err != nil {
		return nil, err
	}
	batch := []jetstream.Msg{first}
	deadline := time.Now().Add(wait)
	for len(batch) < size {
		wait := time.Until(deadline)
		if wait <= 0 {
			break
		}
		m, err := it.Next(jetstream.NextMaxWait(wait))
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return batch, err
			}
			break
		}
		batch = append(batch, m)
	}
	return batch, nil
}

// outage counts the workers waiting out a database that is away (or takes
// no writes): the collector stops pulling once all of them wait — while one
// is free it takes batches — and pulls again when one is through.
type outage struct {
	mu      sync.Mutex
	n       int // the workers
	waiting int
	begunC  chan struct{} // closed while waiting >= n
	overC   chan struct{} // closed while waiting < n
}

func newOutage(workers int) *outage {
	o := &outage{n: max(workers, 1), begunC: make(chan struct{}), overC: make(chan struct{})}
	close(o.overC)
	return o
}

// wait records a worker waiting out the database until the returned func
// is called.
func (o *outage) wait() (done func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.waiting++; o.waiting == o.n {
		close(o.begunC)
		o.overC = make(chan struct{})
	}
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.waiting == o.n {
			close(o.overC)
			o.begunC = make(chan struct{})
		}
		o.waiting--
	}
}

// begun is closed once every worker waits out the database.
func (o *outage) begun() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.begunC
}

// over is closed while a worker is not waiting out the database.
func (o *outage) over() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.overC
}
