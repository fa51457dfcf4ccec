package provider

// Fetched keys (provider paypal's certificates, pubkey.key_url's JWKS):
// verification needs a key from a URL, so ingress makes an outbound
// request, and every fetch is fenced:
//
//   - only https, only to a host on the allowlist (key_url_hosts), no
//     user information, no redirects, at most maxKeyBytes read;
//   - a deadline (keyFetchTimeout) and one fetch per URL at a time: callers
//     of the same URL wait for that fetch, so a slow origin costs one
//     connection, and only this integration's requests wait on it (each
//     verifier has its own fetcher);
//   - cached per URL for keyCacheTTL (or until what was fetched says it
//     expires), at most maxCachedKeys URLs; a refresh before that (an
//     unknown key id) at most once per minAge;
//   - a fetch that fails or times out is ErrUnavailable: ingress answers 503
//     with Retry-After, never 200, and the sender retries. A URL off the
//     allowlist is the caller's to refuse (paypal: 401, the request's claim).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrUnavailable: what verification needs could not be had now (a
// certificate or key set fetch failed or timed out). Ingress answers 503 +
// Retry-After.
var ErrUnavailable = errors.New("verification key unavailable")

const (
	keyFetchTimeout = 3 * time.Second
	keyCacheTTL     = time.Hour
	maxKeyBytes     = 64 << 10
	maxCachedKeys   = 64
)

// keyFetcher fetches, parses and caches what a URL serves: T is a
// certificate or a key set. parse turns the bytes into T and says until
// when it may be used (zero: keyCacheTTL); its error decides the answer
// (wrap ErrUnavailable to have the sender retry).
type keyFetcher[T any] struct {
	hosts  []string // lower-case host names (no port)
	client *http.Client
	parse  func(b []byte, now time.Time) (T, time.Time, error)

	mu       sync.Mutex
	cache    map[string]fetched[T]
	inflight map[string]*fetchCall[T]
}

type fetched[T any] struct {
	val         T
	at, expires time.Time
}

type fetchCall[T any] struct {
	done chan struct{}
	val  fetched[T]
	err  error
}

func newKeyFetcher[T any](hosts []string, parse func([]byte, time.Time) (T, time.Time, error)) *keyFetcher[T] {
	lower := make([]string, len(hosts))
	for i, h := range hosts {
		lower[i] = strings.ToLower(h)
	}
	return &keyFetcher[T]{
		hosts: lower,
		parse: parse,
		client: &http.Client{
			Timeout: keyFetchTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return errors.New("redirects are not followed")
			},
		},
		cache:    map[string]fetched[T]{},
		inflight: map[string]*fetchCall[T]{},
	}
}

// checkHosts validates a key_url_hosts list: host names only.
func checkHosts(hosts []string) error {
	for i, h := range hosts {
		if h == "" || strings.ContainsAny(h, "/:@ ") {
			return fmt.Errorf("key_url_hosts[%d]: a host name, without scheme, port or path", i)
		}
	}
	return nil
}

// allowed reports whether raw is an https URL on the allowlist.
func (f *keyFetcher[T]) allowed(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.User != nil || u.Fragment != "" {
		return false
	}
	return slices.Contains(f.hosts, strings.ToLower(u.Hostname()))
}

// get returns what raw serves, cached or fetched now. The caller checked
// allowed(raw).
func (f *keyFetcher[T]) get(raw string, now time.Time) (T, error) {
	v, _, err := f.lookup(raw, now, -1)
	return v, err
}

// refresh fetches raw again unless what is cached was fetched less than
// minAge before now: then it returns that, with cached true.
func (f *keyFetcher[T]) refresh(raw string, now time.Time, minAge time.Duration) (val T, cached bool, err error) {
	return f.lookup(raw, now, minAge)
}

// lookup serves raw from the cache unless it expired or, with minAge ≥ 0,
// it is at least minAge old; else it joins or starts the one fetch of raw.
func (f *keyFetcher[T]) lookup(raw string, now time.Time, minAge time.Duration) (T, bool, error) {
	f.mu.Lock()
	if c, ok := f.cache[raw]; ok && now.Before(c.expires) && (minAge < 0 || now.Sub(c.at) < minAge) {
		f.mu.Unlock()
		return c.val, true, nil
	}
	if call, ok := f.inflight[raw]; ok {
		f.mu.Unlock()
		<-call.done
		return call.val.val, false, call.err
	}
	// This request fetches, bounded by the timeout; others for the same
	// URL wait for its result.
	call := &fetchCall[T]{done: make(chan struct{})}
	f.inflight[raw] = call
	f.mu.Unlock()
	f.fetch(raw, call, now)
	return call.val.val, false, call.err
}

// fetch runs one fetch of raw and publishes its result to call's waiters.
func (f *keyFetcher[T]) fetch(raw string, call *fetchCall[T], now time.Time) {
	val, expires, err := f.load(raw, now)
	f.mu.Lock()
	delete(f.inflight, raw)
	if err == nil {
		if len(f.cache) >= maxCachedKeys {
			for k := range f.cache { // any one makes room
				delete(f.cache, k)
				break
			}
		}
		if exp := now.Add(keyCacheTTL); expires.IsZero() || exp.Before(expires) {
			expires = exp
		}
		call.val = fetched[T]{val: val, at: now, expires: expires}
		f.cache[raw] = call.val
	}
	f.mu.Unlock()
	call.err = err
	close(call.done)
}

func (f *keyFetcher[T]) load(raw string, now time.Time) (T, time.Time, error) {
	var zero T
	ctx, cancel := context.WithTimeout(context.Background(), keyFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return zero, time.Time{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return zero, time.Time{}, fmt.Errorf("%w: fetching the key: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return zero, time.Time{}, fmt.Errorf("%w: fetching the key: status %d", ErrUnavailable, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxKeyBytes+1))
	if err != nil || len(b) > maxKeyBytes {
		return zero, time.Time{}, fmt.Errorf("%w: reading the key: more than %d bytes, or cut off", ErrUnavailable, maxKeyBytes)
	}
	return f.parse(b, now)
}
