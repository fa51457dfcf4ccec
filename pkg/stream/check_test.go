package stream

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/intakehq/intake/internal/harness/natsserver"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
)

func embedded(t *testing.T, c natsserver.Config) *natsserver.Embedded {
	t.Helper()
	c.Addr, c.StoreDir = "127.0.0.1:0", t.TempDir()
	emb, err := natsserver.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	return emb
}

func jsFor(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func testStream() config.Stream {
	return config.Stream{Replicas: 1, MaxAge: time.Hour, DuplicateWindow: time.Minute, MaxBytes: -1}
}

func TestCompare(t *testing.T) {
	want := InConfig(testStream())
	tests := []struct {
		name           string
		edit           func(*jetstream.StreamConfig)
		mismatch, warn string
	}{
		{"same", func(*jetstream.StreamConfig) {}, "", ""},
		{"subjects in another order", func(c *jetstream.StreamConfig) { c.Subjects = append([]string{}, c.Subjects...) }, "", ""},
		{"other subjects", func(c *jetstream.StreamConfig) { c.Subjects = []string{"intake.in.>", "x.>"} }, "subjects", ""},
		{"interest retention", func(c *jetstream.StreamConfig) { c.Retention = jetstream.InterestPolicy }, "retention", ""},
		{"memory", func(c *jetstream.StreamConfig) { c.Storage = jetstream.MemoryStorage }, "storage", ""},
		{"discard old", func(c *jetstream.StreamConfig) { c.Discard = jetstream.DiscardOld }, "discard", ""},
		{"duplicate window", func(c *jetstream.StreamConfig) { c.Duplicates = 2 * time.Minute }, "duplicate window", ""},
		{"replicas", func(c *jetstream.StreamConfig) { c.Replicas = 3 }, "", "replicas"},
		{"max age", func(c *jetstream.StreamConfig) { c.MaxAge = 2 * time.Hour }, "", "max_age"},
		{"max bytes", func(c *jetstream.StreamConfig) { c.MaxBytes = 1 << 30 }, "", "max_bytes"},
		{"max bytes 0 is -1", func(c *jetstream.StreamConfig) { c.MaxBytes = 0 }, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := want
			tt.edit(&got)
			mismatch, warn := Compare(want, got)
			check := func(kind string, list []string, want string) {
				if want == "" && len(list) > 0 || want != "" && (len(list) != 1 || !strings.Contains(list[0], want)) {
					t.Errorf("%s = %q, want one naming %q", kind, list, want)
				}
			}
			check("mismatch", mismatch, tt.mismatch)
			check("warnings", warn, tt.warn)
		})
	}
}

// TestCheck: the roles' start-up check against a real server — a missing
// stream and a changed setting stop the start naming stream and setting;
// a different size is a warning.
func TestCheck(t *testing.T) {
	js := jsFor(t, embedded(t, natsserver.Config{}).ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sc := testStream()

	err := Check(ctx, js, sc, nil)
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), envelope.StreamIn+" does not exist") ||
		!strings.Contains(err.Error(), "intake migrate") {
		t.Fatalf("Check before Ensure = %v", err)
	}
	if err := Ensure(ctx, js, sc); err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, js, sc, nil); err != nil {
		t.Fatalf("Check after Ensure = %v", err)
	}

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	longer := sc
	longer.MaxAge = 2 * time.Hour
	if err := Check(ctx, js, longer, log, envelope.StreamOut); err != nil {
		t.Fatalf("Check with another max_age = %v, want a warning only", err)
	}
	if !strings.Contains(logs.String(), "max_age") || !strings.Contains(logs.String(), envelope.StreamOut) {
		t.Fatalf("no warning about max_age: %s", logs.String())
	}

	wider := sc
	wider.DuplicateWindow = 5 * time.Minute
	err = Check(ctx, js, wider, nil, envelope.StreamOut)
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), envelope.StreamOut) || !strings.Contains(err.Error(), "duplicate window") {
		t.Fatalf("Check with another duplicate window = %v", err)
	}
}

// TestConnectWithNkeyAndInboxPrefix: an nkey user of a server configured
// from a file connects through Options, and its replies come to the role's
// own inbox prefix; an anonymous client is refused.
func TestConnectWithNkeyAndInboxPrefix(t *testing.T) {
	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	dir := t.TempDir()
	seedFile := filepath.Join(dir, "ingress.nk")
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte(`authorization { users: [ { nkey: `+pub+`,
		permissions: { subscribe: { allow: ["_INBOX_intake_ingress.>"] } } } ] }`), 0o600); err != nil {
		t.Fatal(err)
	}
	emb := embedded(t, natsserver.Config{ConfigFile: conf})
	if nc, err := nats.Connect(emb.ClientURL(), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected to a server with users")
	}
	nc, err := Connect(config.NATS{URL: emb.ClientURL(), NkeySeed: seedFile, InboxPrefix: config.DefaultInboxPrefix}, "ingress", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if in := nc.NewInbox(); !strings.HasPrefix(in, "_INBOX_intake_ingress.") {
		t.Fatalf("inbox %q, want the role's prefix", in)
	}
	// A JetStream request: its reply comes to the allowed inbox.
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("a request through the role's inbox: %v", err)
	}
}
