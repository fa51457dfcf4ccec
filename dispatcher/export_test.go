package dispatcher

import "time"

// SetAckMargin shortens what a destination's consumer adds to its timeout
// for the ack wait, until the returned function restores it. Consumers
// created meanwhile keep the shorter wait.
func SetAckMargin(d time.Duration) (restore func()) {
	old := ackMargin
	ackMargin = d
	return func() { ackMargin = old }
}
