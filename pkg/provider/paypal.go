package provider

// PayPal (REST webhooks): PAYPAL-TRANSMISSION-SIG is base64 RSA
// (SHA256withRSA) over
//
//	{PAYPAL-TRANSMISSION-ID}|{PAYPAL-TRANSMISSION-TIME}|{webhook id}|{CRC32 of the body, unsigned decimal}
//
// verified with the certificate at PAYPAL-CERT-URL, fetched from an
// allowed host only (certfetch.go, keyfetch.go). The webhook id — PayPal's name for the
// endpoint, from its dashboard — is configured in secrets (several for a
// move between webhooks); it is not secret, there is no shared secret in
// this scheme. The transmission time (RFC 3339) must lie within ± tolerance.
//
// The signature covers a CRC32 of the body, not a hash: anyone holding one
// captured delivery can write another body with the same CRC32, and it
// verifies until the transmission time leaves the window. So a
// transmission id already seen with another body is refused (the token
// cache of mailgun.go, per process), the event id (body id) is unsigned in
// effect and the replay guard is on by default. TLS is the event's
// integrity; PayPal's own postback verification API is the stronger check
// and is not used here.

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"strconv"
	"time"
)

// PayPalCertHosts are the hosts PayPal serves its certificates from: the
// default key_url_hosts of provider paypal.
var PayPalCertHosts = []string{"api.paypal.com", "api-m.paypal.com", "api.sandbox.paypal.com", "api-m.sandbox.paypal.com"}

type paypal struct {
	webhookIDs []string
	tolerance  time.Duration
	certs      *certFetcher
	ids        *tokenCache
	identity   identityReader
}

func newPayPal(cfg Config) (Verifier, error) {
	hosts := cfg.KeyURLHosts
	if len(hosts) == 0 {
		hosts = PayPalCertHosts
	}
	if err := checkHosts(hosts); err != nil {
		return nil, err
	}
	p := &paypal{webhookIDs: cfg.Secrets, tolerance: cfg.Tolerance, certs: newCertFetcher(hosts), ids: newTokenCache(maxMailgunTokens)}
	var err error
	p.identity, err = newIdentity(cfg, identityFields{eventID: Field{Field: "id"}, eventType: Field{Field: "event_type"}})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (p *paypal) Verify(d *Request) (Identity, error) {
	var h [5]string
	for i, name := range []string{"Paypal-Transmission-Id", "Paypal-Transmission-Time", "Paypal-Cert-Url", "Paypal-Auth-Algo", "Paypal-Transmission-Sig"} {
		if h[i] = d.Header.Get(name); h[i] == "" {
			return Identity{}, fmt.Errorf("%w: %s", ErrMissingHeader, name)
		}
	}
	id, ts, certURL, algo, sig64 := h[0], h[1], h[2], h[3], h[4]
	if algo != "SHA256withRSA" {
		return Identity{}, fmt.Errorf("%w: PAYPAL-AUTH-ALGO %q (SHA256withRSA only)", ErrBadSignature, algo)
	}
	if len(id) > 128 {
		return Identity{}, fmt.Errorf("%w: PAYPAL-TRANSMISSION-ID is too long", ErrBadSignature)
	}
	t, err := formatRFC3339.parse(ts, true)
	if err == nil {
		err = windowBoth.check(t, d.now(), p.tolerance)
	}
	if err != nil {
		return Identity{}, fmt.Errorf("%w (PAYPAL-TRANSMISSION-TIME)", err)
	}
	sig, err := base64.StdEncoding.DecodeString(sig64)
	if err != nil || len(sig) == 0 || len(sig) > 1024 {
		return Identity{}, fmt.Errorf("%w: PAYPAL-TRANSMISSION-SIG is not base64", ErrBadSignature)
	}
	// The URL is the request's claim: its host is checked before any
	// fetch, and the fetch is the last step before the RSA check.
	cert, err := p.certs.cert(certURL, d.now())
	if err != nil {
		return Identity{}, err
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok || pub.N.BitLen() < minRSABits {
		return Identity{}, fmt.Errorf("%w: the certificate's key is no RSA key of %d bits or more", ErrBadSignature, minRSABits)
	}
	crc := strconv.FormatUint(uint64(crc32.ChecksumIEEE(d.Body)), 10)
	idx := -1
	for i, wh := range p.webhookIDs {
		digest := sha256.Sum256([]byte(id + "|" + ts + "|" + wh + "|" + crc))
		if rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig) == nil {
			idx = i
			break
		}
	}
	if idx < 0 {
		return Identity{}, fmt.Errorf("%w: PAYPAL-TRANSMISSION-SIG does not verify", ErrBadSignature)
	}
	ev := Identity{SecretIndex: idx}
	body := jsonBody{raw: d.Body}
	if err := p.identity.read(d.Header, &body, &ev); err != nil {
		return Identity{}, err
	}
	if !p.ids.claim(id, sha256.Sum256(d.Body), d.now(), 2*p.tolerance) {
		return Identity{}, fmt.Errorf("%w: PAYPAL-TRANSMISSION-ID was already used with another body", ErrBadSignature)
	}
	return ev, nil
}
