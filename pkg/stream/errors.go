package stream

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrRefused is wrapped by the errors of Ensure, EnsureProcessorConsumer,
// EnsureReceiptsConsumer and WaitReady when JetStream answered with a
// refusal — a configuration it will not accept, a consumer that cannot be
// updated to ours, a stream that does not exist, a limit reached — rather
// than not answering or an error that passes by itself (503, an election, a
// consumer offline for a moment: see passing), which they retry until ctx
// ends.
// Sending the same request again gets the same answer; only a change on the
// server can help, so callers give up at once instead of waiting.
var ErrRefused = errors.New("refused by JetStream")

// passing reports whether a JetStream API error is one that goes away by
// itself — the system or a leader unavailable, an election, a stream or
// consumer briefly offline, too many requests — so that the same request
// may succeed later. Everything else (a configuration it will not accept, a
// consumer that cannot be updated to ours, a missing stream) is a refusal.
func passing(e *jetstream.APIError) bool {
	switch e.Code {
	case 503, 429, 408:
		return true
	}
	switch e.ErrorCode {
	case 10007, // JSClusterNotAssignedErr
		10009, // JSClusterNotLeaderErr
		10041, // JSRaftGeneralErrF
		10118, // JSStreamOfflineErr
		10119, // JSConsumerOfflineErr
		10194, // JSStreamOfflineReasonErrF
		10195: // JSConsumerOfflineReasonErrF
		return true
	}
	return false
}
