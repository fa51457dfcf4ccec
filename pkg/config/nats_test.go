package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// natsFiles writes a credentials file, a seed file, a CA and a client
// certificate with its key into a temporary directory.
type natsFiles struct{ dir, creds, seed, ca, cert, key, junk string }

func writeNATSFiles(t *testing.T) natsFiles {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	user, _ := nkeys.CreateUser()
	seed, _ := user.Seed()
	pub, _ := user.PublicKey()
	account, _ := nkeys.CreateAccount()
	token, err := jwt.NewUserClaims(pub).Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		t.Fatal(err)
	}

	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "intake-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return natsFiles{
		dir:   dir,
		creds: write("user.creds", creds),
		seed:  write("user.nk", append(seed, '\n')),
		ca:    write("ca.pem", certPEM),
		cert:  write("client.pem", certPEM),
		key:   write("client-key.pem", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})),
		junk:  write("junk", []byte("not a key, not a certificate\n")),
	}
}

func TestNATSAuthAndTLS(t *testing.T) {
	f := writeNATSFiles(t)
	missing := filepath.Join(f.dir, "missing")
	tests := []struct {
		name string
		n    NATS
		want string // "" for valid
	}{
		{"none", NATS{}, ""},
		{"credentials", NATS{Credentials: f.creds}, ""},
		{"nkey seed", NATS{NkeySeed: f.seed}, ""},
		{"user and password", NATS{User: "ingress", Password: "from-the-env"}, ""},
		{"tls", NATS{TLS: NATSTLS{CA: f.ca, Cert: f.cert, Key: f.key}}, ""},
		{"credentials with tls", NATS{Credentials: f.creds, TLS: NATSTLS{CA: f.ca}}, ""},

		{"credentials missing", NATS{Credentials: missing}, "nats.credentials"},
		{"credentials junk", NATS{Credentials: f.junk}, "nats.credentials"},
		{"credentials without a JWT", NATS{Credentials: f.seed}, "nats.credentials"},
		{"seed missing", NATS{NkeySeed: missing}, "nats.nkey_seed"},
		{"seed junk", NATS{NkeySeed: f.junk}, "nats.nkey_seed"},
		{"user without password", NATS{User: "ingress"}, "nats.user"},
		{"password without user", NATS{Password: "x"}, "nats.user"},
		{"two methods", NATS{Credentials: f.creds, User: "ingress", Password: "x"}, "at most one authentication method"},
		{"three methods", NATS{Credentials: f.creds, NkeySeed: f.seed, User: "u", Password: "p"}, "nats.credentials, nats.nkey_seed, nats.user/password"},
		{"credentials in the url", NATS{URL: "nats://ingress:pw@127.0.0.1:4222"}, ""},
		{"url credentials and a user", NATS{URL: "nats://a:4222,nats://ingress:pw@b:4222", User: "ingress", Password: "x"}, "credentials in nats.url"},
		{"ca missing", NATS{TLS: NATSTLS{CA: missing}}, "nats.tls.ca"},
		{"ca junk", NATS{TLS: NATSTLS{CA: f.junk}}, "nats.tls.ca"},
		{"cert without key", NATS{TLS: NATSTLS{Cert: f.cert}}, "nats.tls.cert"},
		{"key without cert", NATS{TLS: NATSTLS{Key: f.key}}, "nats.tls.cert"},
		{"cert junk", NATS{TLS: NATSTLS{Cert: f.junk, Key: f.key}}, "nats.tls.cert"},
		{"inbox wildcard", NATS{InboxPrefix: "_INBOX.>"}, "nats.inbox_prefix"},
		{"inbox trailing dot", NATS{InboxPrefix: "_INBOX."}, "nats.inbox_prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.n.WithDefaults().Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want it to name %q", err, tt.want)
			}
		})
	}
}

// TestNATSPasswordFromTheEnvironment: the password is expanded from the
// environment, and a reference to an unset variable stops the load.
func TestNATSPasswordFromTheEnvironment(t *testing.T) {
	yaml := minimal + "nats: {user: \"${INTAKE_NATS_USER}\", password: \"${INTAKE_NATS_PASSWORD}\"}\n"
	cfg, err := Parse([]byte(yaml), env(map[string]string{"SECRET": "whsec_AAAA",
		"INTAKE_NATS_USER": "ingress", "INTAKE_NATS_PASSWORD": "p@ss word"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NATS.User != "ingress" || cfg.NATS.Password != "p@ss word" || cfg.NATS.InboxPrefix != DefaultInboxPrefix {
		t.Fatalf("nats = %+v", cfg.NATS)
	}
	if _, err := Parse([]byte(yaml), env(map[string]string{"SECRET": "whsec_AAAA", "INTAKE_NATS_USER": "ingress"})); err == nil ||
		!strings.Contains(err.Error(), "INTAKE_NATS_PASSWORD") {
		t.Fatalf("an unset password variable: %v", err)
	}
}
