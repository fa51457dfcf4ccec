package stream

import "errors"

// ErrRefused is wrapped by the errors of Ensure, EnsureProcessorConsumer,
// EnsureReceiptsConsumer and WaitReady when JetStream answered with a
// refusal — a configuration it will not accept, a consumer that cannot be
// updated to ours, a stream that does not exist, a limit reached — rather
// than not answering or answering 503 (which they retry until ctx ends).
// Sending the same request again gets the same answer; only a change on the
// server can help, so callers give up at once instead of waiting.
var ErrRefused = errors.New("refused by JetStream")
