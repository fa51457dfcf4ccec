package dispatcher

import (
	"net/http"
	"slices"
	"time"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/store"
)

// Error classes of an attempt (intake.dispatch_attempts.error_class); ""
// when it was delivered.
const (
	ClassTimeout     = "timeout"      // no answer within the destination's timeout
	ClassConnect     = "connect"      // the connection could not be made (refused, unreachable, DNS)
	ClassTLS         = "tls"          // the TLS handshake failed (certificate, protocol)
	ClassConnection  = "connection"   // the connection broke, or the answer was not HTTP
	ClassRedirect    = "redirect"     // a 3xx: redirects are never followed
	ClassClientError = "client_error" // a 4xx
	ClassRateLimited = "rate_limited" // a 429
	ClassServerError = "server_error" // a 5xx
	ClassStatus      = "status"       // a 1xx or an unknown status
)

// result is what one attempt got.
type result struct {
	status     int           // 0: no answer
	class      string        // "" when delivered
	retryAfter time.Duration // a 429's or 503's Retry-After, 0 when absent
}

// decide is what becomes of a message after attempt number attempt (from
// 1) got r: delivered, retried after wait, or failed. The dispatcher and
// the documentation's table (docs/destinations.md) follow it; it is
// table-tested.
func decide(r result, attempt int, d config.Destination) (outcome string, wait time.Duration) {
	if r.status >= 200 && r.status < 300 {
		return store.DispatchDelivered, 0
	}
	if !retryable(r, d) || attempt > len(d.Retry) {
		return store.DispatchFailed, 0
	}
	wait = d.Retry[max(attempt-1, 0)]
	if r.retryAfter > wait {
		wait = min(r.retryAfter, config.MaxRetryAfter)
	}
	return store.DispatchRetry, wait
}

// retryable reports whether sending the same request again may succeed:
// no answer at all, 408, 429, a 5xx, or a 4xx the destination lists in
// retry_statuses. A redirect and any other 4xx are the receiver's
// deliberate answer.
func retryable(r result, d config.Destination) bool {
	switch s := r.status; {
	case s == 0:
		return true
	case s == http.StatusRequestTimeout, s == http.StatusTooManyRequests, s >= 500:
		return true
	case s >= 400 && s < 500:
		return slices.Contains(d.RetryStatuses, s)
	}
	return false
}

// classOf is the error class of an answer with status s.
func classOf(s int) string {
	switch {
	case s >= 200 && s < 300:
		return ""
	case s >= 300 && s < 400:
		return ClassRedirect
	case s == http.StatusTooManyRequests:
		return ClassRateLimited
	case s >= 400 && s < 500:
		return ClassClientError
	case s >= 500 && s < 600:
		return ClassServerError
	}
	return ClassStatus
}
