package provider

// Fetched certificates (provider paypal): the sender names, per delivery,
// the URL of the certificate its signature verifies under. Ingress then
// makes an outbound request, so the fetch is fenced:
//
//   - only https, only to a host on the allowlist (key_url_hosts, by default
//     the sender's own), no redirects, at most maxCertBytes read;
//   - a deadline (certFetchTimeout) and one fetch per URL at a time: callers
//     of the same URL wait for that fetch, so a slow origin costs one
//     connection, and only this integration's requests wait on it;
//   - the certificate must chain to the system roots and be valid now;
//   - cached per URL for certCacheTTL (or until it expires), at most
//     maxCachedCerts URLs;
//   - a fetch that fails or times out is ErrUnavailable: ingress answers 503
//     with Retry-After, never 200, and the sender retries. A URL off the
//     allowlist is ErrBadSignature (401): it is the request's claim.

import (
	"context"
	"crypto/x509"
	"encoding/pem"
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
// certificate fetch failed or timed out). Ingress answers 503 + Retry-After.
var ErrUnavailable = errors.New("verification key unavailable")

const (
	certFetchTimeout = 3 * time.Second
	certCacheTTL     = time.Hour
	maxCertBytes     = 64 << 10
	maxCachedCerts   = 64
)

type certFetcher struct {
	hosts  []string // lower-case host names (no port)
	client *http.Client
	roots  *x509.CertPool // nil: the system roots

	mu       sync.Mutex
	cache    map[string]cachedCert
	inflight map[string]*certCall
}

type cachedCert struct {
	cert    *x509.Certificate
	expires time.Time
}

type certCall struct {
	done chan struct{}
	cert *x509.Certificate
	err  error
}

func newCertFetcher(hosts []string) *certFetcher {
	lower := make([]string, len(hosts))
	for i, h := range hosts {
		lower[i] = strings.ToLower(h)
	}
	return &certFetcher{
		hosts: lower,
		client: &http.Client{
			Timeout: certFetchTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return errors.New("redirects are not followed")
			},
		},
		cache:    map[string]cachedCert{},
		inflight: map[string]*certCall{},
	}
}

// allowed reports whether raw is an https URL on the allowlist.
func (f *certFetcher) allowed(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.User != nil || u.Fragment != "" {
		return false
	}
	return slices.Contains(f.hosts, strings.ToLower(u.Hostname()))
}

// cert returns the leaf certificate at raw, fetched or cached.
func (f *certFetcher) cert(raw string, now time.Time) (*x509.Certificate, error) {
	if !f.allowed(raw) {
		return nil, fmt.Errorf("%w: the certificate URL is not https on an allowed host (key_url_hosts)", ErrBadSignature)
	}
	f.mu.Lock()
	if c, ok := f.cache[raw]; ok && now.Before(c.expires) {
		f.mu.Unlock()
		return c.cert, nil
	}
	if call, ok := f.inflight[raw]; ok {
		f.mu.Unlock()
		<-call.done
		return call.cert, call.err
	}
	// This request fetches (in its own goroutine, bounded by the timeout);
	// others for the same URL wait for its result.
	call := &certCall{done: make(chan struct{})}
	f.inflight[raw] = call
	f.mu.Unlock()
	f.fetch(raw, call, now)
	return call.cert, call.err
}

// fetch runs one fetch of raw and publishes its result to call's waiters.
func (f *certFetcher) fetch(raw string, call *certCall, now time.Time) {
	cert, err := f.load(raw, now)
	f.mu.Lock()
	delete(f.inflight, raw)
	if err == nil {
		if len(f.cache) >= maxCachedCerts {
			for k := range f.cache { // any one makes room
				delete(f.cache, k)
				break
			}
		}
		exp := now.Add(certCacheTTL)
		if cert.NotAfter.Before(exp) {
			exp = cert.NotAfter
		}
		f.cache[raw] = cachedCert{cert: cert, expires: exp}
	}
	f.mu.Unlock()
	call.cert, call.err = cert, err
	close(call.done)
}

func (f *certFetcher) load(raw string, now time.Time) (*x509.Certificate, error) {
	ctx, cancel := context.WithTimeout(context.Background(), certFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: fetching the certificate: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: fetching the certificate: status %d", ErrUnavailable, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxCertBytes+1))
	if err != nil || len(b) > maxCertBytes {
		return nil, fmt.Errorf("%w: reading the certificate", ErrUnavailable)
	}
	var leaf *x509.Certificate
	inter := x509.NewCertPool()
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: the fetched certificate does not parse", ErrBadSignature)
		}
		if leaf == nil {
			leaf = c
		} else {
			inter.AddCert(c)
		}
	}
	if leaf == nil {
		return nil, fmt.Errorf("%w: no certificate at the URL", ErrBadSignature)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: f.roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("%w: the certificate does not chain to a trusted root: %v", ErrBadSignature, err)
	}
	return leaf, nil
}
