package dispatcher

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
)

// MaxResponseBytes is the most of an answer's body a dispatcher reads: a
// body up to it is drained so the connection is reused, a longer one is
// cut and the connection closed. The delivery log keeps the first
// store.MaxDispatchResponse bytes.
const MaxResponseBytes = 64 << 10

// maxResponseHeaderBytes bounds an answer's headers.
const maxResponseHeaderBytes = 64 << 10

// Headers of a delivery besides the Standard Webhooks ones and the
// message's own Intake-* identity.
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
	HeaderIdempotencyKey   = "Idempotency-Key"
	HeaderDestination      = "Intake-Destination"
	HeaderAttempt          = "Intake-Attempt"
	userAgent              = "Intake-Dispatcher"
)

// identityHeaders are the message headers a delivery carries as they are.
var identityHeaders = []string{envelope.HeaderKey, envelope.HeaderIntegration, envelope.HeaderTenant,
	envelope.HeaderAccount, envelope.HeaderEventID, envelope.HeaderEventType, envelope.HeaderExecutionID,
	envelope.HeaderReceivedAt, envelope.HeaderRedeliveryID, envelope.HeaderTraceparent}

// Canonical header names, and values shared by every delivery (a
// header's value slice is only read by the transport).
var (
	hdrContentType      = http.CanonicalHeaderKey("Content-Type")
	hdrUserAgent        = http.CanonicalHeaderKey("User-Agent")
	hdrIdempotencyKey   = http.CanonicalHeaderKey(HeaderIdempotencyKey)
	hdrDestination      = http.CanonicalHeaderKey(HeaderDestination)
	hdrAttempt          = http.CanonicalHeaderKey(HeaderAttempt)
	hdrWebhookID        = http.CanonicalHeaderKey(HeaderWebhookID)
	hdrWebhookTimestamp = http.CanonicalHeaderKey(HeaderWebhookTimestamp)
	hdrWebhookSignature = http.CanonicalHeaderKey(HeaderWebhookSignature)
	identityCanonical   = canonical(identityHeaders)
	userAgentValue      = []string{userAgent}
	jsonType            = []string{"application/json"}
	octetType           = []string{"application/octet-stream"}
)

func canonical(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = http.CanonicalHeaderKey(n)
	}
	return out
}

// contentType is application/json for a body that starts as JSON does
// (an object or an array, after white space), else
// application/octet-stream. It reads the first bytes only: a full
// json.Valid cost more than signing at 16 KiB, and what INTAKE_OUT holds
// is what a handler emitted, JSON unless it said otherwise.
func contentType(body []byte) []string {
	for _, c := range body {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', '[':
			return jsonType
		}
		break
	}
	return octetType
}

// newClient is a destination's HTTP client: no redirects, no proxy from
// the environment (a destination URL is the config's word), bounded
// headers, one idle connection per delivery in flight.
func newClient(timeout time.Duration, maxInFlight int) *http.Client {
	t := &http.Transport{
		DialContext:            (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           maxInFlight,
		MaxIdleConnsPerHost:    maxInFlight,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    timeout,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		// A request's headers and a body up to this size leave in one
		// write, not one per 4 KiB (the default): a fifth less CPU per
		// 16 KiB delivery (BENCHMARKS.md). One buffer per connection.
		WriteBufferSize: 64 << 10,
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12},
	}
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// webhookID is a message's webhook-id: the original's Nats-Msg-Id for a
// redelivered copy, else its own, so retries, replays of the same
// execution, re-drives and redeliveries all carry the id the receiver
// recorded.
func webhookID(h nats.Header, seq uint64) string {
	if id := h.Get(envelope.HeaderOriginalMsgID); id != "" {
		return id
	}
	if id := h.Get(envelope.HeaderMsgID); id != "" {
		return id
	}
	return "intake-out-" + strconv.FormatUint(seq, 10)
}

// attemptOut is what an attempt sent and got, for the log.
type attemptOut struct {
	result
	latency  time.Duration
	response string
}

// post makes one attempt: msg's payload POSTed to the destination, signed.
func (d *destination) post(ctx context.Context, msg jetstream.Msg, id string, attempt int) attemptOut {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	body := msg.Data()
	req := d.newRequest(ctx, body)
	// Headers set straight into the map under their canonical names:
	// Header.Set would canonicalize each of them on every delivery. The
	// one-value slices share one backing array.
	h, out := msg.Headers(), req.Header
	vals := make([]string, 0, len(identityHeaders)+5)
	one := func(v string) []string {
		vals = append(vals, v)
		return vals[len(vals)-1 : len(vals) : len(vals)]
	}
	out[hdrContentType] = contentType(body)
	out[hdrUserAgent] = userAgentValue
	for i, name := range identityHeaders {
		if v := h.Get(name); v != "" {
			out[identityCanonical[i]] = one(v)
		}
	}
	if k := h.Get(envelope.HeaderKey); k != "" {
		out[hdrIdempotencyKey] = one(k)
	}
	out[hdrDestination] = d.destinationValue
	out[hdrAttempt] = one(strconv.Itoa(attempt))
	now := time.Now()
	out[hdrWebhookID] = one(id)
	out[hdrWebhookTimestamp] = one(strconv.FormatInt(now.Unix(), 10))
	out[hdrWebhookSignature] = one(d.signer.sign(id, now.Unix(), body))

	// The transport itself: no redirect is ever followed, so the client's
	// redirect bookkeeping (a copy of every header per request) is saved.
	resp, err := d.transport.RoundTrip(req)
	if err != nil {
		return attemptOut{result: result{class: classifyError(err)}, latency: time.Since(now)}
	}
	defer resp.Body.Close()
	var buf []byte
	var readErr error
	if resp.ContentLength != 0 { // 0: no body (204, or a declared empty one)
		buf, readErr = io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	}
	res := attemptOut{result: result{status: resp.StatusCode, class: classOf(resp.StatusCode)}, latency: time.Since(now)}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), now)
	}
	note := ""
	switch {
	case len(buf) > MaxResponseBytes:
		buf, note = buf[:MaxResponseBytes], "[answer longer than 64 KiB: cut] "
	case readErr != nil:
		note = "[answer body broke off: " + classifyError(readErr) + "] "
	}
	res.response = note + strings.ToValidUTF8(string(buf[:min(len(buf), 2*MaxResponseBytes)]), "\uFFFD")
	return res
}

// deliveryHeaders is how many headers a delivery sets, at most.
var deliveryHeaders = len(identityHeaders) + 8

// newRequest is the POST of body to the destination, under ctx: the URL
// parsed once, the header map sized for a delivery's headers
// (http.NewRequest parses the URL and the map grows, on every delivery).
// GetBody lets the transport send the body again on a connection that
// closed before it was written (it does for requests with an
// Idempotency-Key, as every delivery has).
func (d *destination) newRequest(ctx context.Context, body []byte) *http.Request {
	req := &http.Request{Method: http.MethodPost, URL: d.url, Host: strings.TrimSuffix(d.url.Host, ":"),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header, deliveryHeaders), ContentLength: int64(len(body))}
	if len(body) == 0 {
		req.Body, req.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
	} else {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return req.WithContext(ctx)
}

// parseRetryAfter reads a Retry-After header, seconds or an HTTP date; 0
// when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, int64(1<<62/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// classifyError is the class of an attempt that got no answer.
func classifyError(err error) string {
	var (
		dns       *net.DNSError
		op        *net.OpError
		netErr    net.Error
		record    tls.RecordHeaderError
		verify    *tls.CertificateVerificationError
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return ClassTimeout
	case errors.As(err, &record), errors.As(err, &verify), errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid):
		return ClassTLS
	case errors.As(err, &dns), errors.As(err, &op) && op.Op == "dial":
		return ClassConnect
	}
	return ClassConnection
}
