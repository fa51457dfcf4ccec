package processor

import (
	"errors"
	"fmt"
	"sync"
)

// NotReadyAfter is how many batches in a row must end with nothing
// committed, each failing in Intake's own writes (not a handler's error, not
// the database away), before Run reports the processor not ready
// (WithHealth): a processor whose every batch fails — an argument pgx cannot
// encode, a trigger refusing the inbox rows — burns its messages'
// deliveries while it looks healthy otherwise. One batch committing
// anything makes it ready again.
const NotReadyAfter = 5

// readiness folds Run's two reports into the one WithHealth gives: its
// consumer's (supervise) and its batches'. Workers call batchEnded
// concurrently.
type readiness struct {
	mu       sync.Mutex
	report   func(error)
	consumer error
	batches  error
	failing  int // batches in a row that committed nothing, their own writes failing
}

func (r *readiness) setConsumer(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.consumer = err
	r.report(errors.Join(r.consumer, r.batches))
}

// batchEnded records how a batch ended: whether any of its transactions
// committed, and the last error of Intake's own writes (nil: none failed).
func (r *readiness) batchEnded(committed bool, ownErr error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case committed:
		r.failing = 0
		if r.batches == nil {
			return
		}
		r.batches = nil
	case ownErr != nil:
		if r.failing++; r.failing < NotReadyAfter {
			return
		}
		r.batches = fmt.Errorf("the last %d batches committed nothing, each failing in Intake's own writes "+
			"(messages are retried and use up deliveries): %w", r.failing, ownErr)
	default:
		return
	}
	r.report(errors.Join(r.consumer, r.batches))
}
