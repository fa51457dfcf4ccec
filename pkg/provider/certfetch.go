package provider

// Fetched certificates (provider paypal): the sender names, per delivery,
// the URL of the certificate its signature verifies under, fetched as
// keyfetch.go fences every fetch. On top of that, the certificate must
// chain to the system roots and be valid now, and is cached no longer than
// it is valid. A URL off the allowlist is ErrBadSignature (401): it is the
// request's claim, and nothing is fetched.

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"time"
)

type certFetcher struct {
	*keyFetcher[*x509.Certificate]
	roots *x509.CertPool // nil: the system roots
}

func newCertFetcher(hosts []string) *certFetcher {
	c := &certFetcher{}
	c.keyFetcher = newKeyFetcher(hosts, c.parse)
	return c
}

// cert returns the leaf certificate at raw, fetched or cached.
func (c *certFetcher) cert(raw string, now time.Time) (*x509.Certificate, error) {
	if !c.allowed(raw) {
		return nil, fmt.Errorf("%w: the certificate URL is not https on an allowed host (key_url_hosts)", ErrBadSignature)
	}
	return c.get(raw, now)
}

// parse reads the PEM chain at the URL: the first certificate is the leaf,
// the others intermediates. It is cached until the leaf expires.
func (c *certFetcher) parse(b []byte, now time.Time) (*x509.Certificate, time.Time, error) {
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
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("%w: the fetched certificate does not parse", ErrBadSignature)
		}
		if leaf == nil {
			leaf = cert
		} else {
			inter.AddCert(cert)
		}
	}
	if leaf == nil {
		return nil, time.Time{}, fmt.Errorf("%w: no certificate at the URL", ErrBadSignature)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: c.roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: the certificate does not chain to a trusted root: %v", ErrBadSignature, err)
	}
	return leaf, leaf.NotAfter, nil
}
