package intake

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
)

// certLoader serves the public listener's certificate and reloads it when
// its files change, so a renewed certificate (cert-manager, certbot, a
// Kubernetes secret update) is used without a restart. Each handshake stats
// both files (cheap next to the handshake); a change in either one's mtime,
// size or identity (an atomic rename, a symlink swap) loads the pair again.
// A pair that does not load keeps the current certificate and logs the
// error once, so a renewal written one file at a time never breaks serving.
type certLoader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu   sync.Mutex
	cert *tls.Certificate
	seen pairState // of the files last loaded or tried
}

// pairState is what the loader compares between handshakes.
type pairState struct {
	cert, key os.FileInfo
	err       string // a file could not be stat'ed
}

func (s pairState) same(o pairState) bool {
	return s.err == o.err && sameFile(s.cert, o.cert) && sameFile(s.key, o.key)
}

func sameFile(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && os.SameFile(a, b)
}

// newCertLoader loads the pair once: a pair that does not load at start
// fails the start, naming the config fields.
func newCertLoader(certFile, keyFile string, log *slog.Logger) (*certLoader, error) {
	l := &certLoader{certFile: certFile, keyFile: keyFile, log: log}
	l.seen = l.state()
	if l.seen.err != "" {
		return nil, fmt.Errorf("http.tls: %s", l.seen.err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("http.tls.cert_file %s, key_file %s: %w", certFile, keyFile, err)
	}
	l.cert = &cert
	return l, nil
}

func (l *certLoader) state() pairState {
	var s pairState
	var err error
	if s.cert, err = os.Stat(l.certFile); err != nil {
		s.err = err.Error()
	}
	if s.key, err = os.Stat(l.keyFile); err != nil && s.err == "" {
		s.err = err.Error()
	}
	return s
}

// config is the public listener's TLS configuration.
func (l *certLoader) config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: l.getCertificate}
}

// getCertificate is tls.Config.GetCertificate: the current certificate,
// reloaded first if the files changed since they were last looked at.
func (l *certLoader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.state()
	if now.same(l.seen) {
		return l.cert, nil
	}
	l.seen = now
	if now.err != "" {
		l.log.Error("tls: cannot read the certificate files; keeping the current certificate", "err", now.err)
		return l.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(l.certFile, l.keyFile)
	if err != nil {
		l.log.Error("tls: the changed certificate files do not load; keeping the current certificate",
			"cert_file", l.certFile, "key_file", l.keyFile, "err", err)
		return l.cert, nil
	}
	l.cert = &cert
	l.log.Info("tls: certificate reloaded", "cert_file", l.certFile, "not_after", cert.Leaf.NotAfter)
	return l.cert, nil
}
