package testrig

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/stream"
)

// TestStream is the stream configuration tests use when they do not bring
// their own: one replica, an hour of retention, a two-minute duplicate
// window, no size limit.
func TestStream() config.Stream {
	return config.Stream{Replicas: 1, MaxAge: time.Hour, DuplicateWindow: 2 * time.Minute, MaxBytes: -1}
}

// JetStream is an embedded nats-server private to one test, with Intake's
// streams, and a client connection that reconnects across Server.Restart.
type JetStream struct {
	Server *testenv.NATSServer
	Conn   *nats.Conn
	JS     jetstream.JetStream
}

// NATS starts an embedded nats-server (testenv.NATS), connects to it and
// ensures the streams of sc (a zero sc means TestStream()).
func NATS(t testing.TB, sc config.Stream) *JetStream {
	t.Helper()
	if sc == (config.Stream{}) {
		sc = TestStream()
	}
	srv := testenv.NATS(t)
	j := &JetStream{Server: srv}
	j.Conn, j.JS = Connect(t, srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := stream.Ensure(ctx, j.JS, sc); err != nil {
		t.Fatalf("testrig: ensure streams: %v", err)
	}
	return j
}

// Connect opens a connection of its own to url (a second process, say),
// closed when the test ends.
func Connect(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("testrig: connect to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("testrig: jetstream: %v", err)
	}
	return nc, js
}

// Publish publishes msg and returns its stream sequence.
func (j *JetStream) Publish(t testing.TB, msg *nats.Msg) uint64 {
	t.Helper()
	ack, err := j.JS.PublishMsg(context.Background(), msg)
	if err != nil {
		t.Fatalf("testrig: publish %s: %v", msg.Subject, err)
	}
	return ack.Sequence
}

// Messages returns every message stored in the stream called name, in
// sequence order (deleted ones skipped).
func (j *JetStream) Messages(t testing.TB, name string) []*jetstream.RawStreamMsg {
	t.Helper()
	return Messages(t, j.JS, name)
}

// Messages returns every message stored in the stream called name, in
// sequence order (deleted ones skipped).
func Messages(t testing.TB, js jetstream.JetStream, name string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("testrig: stream %s: %v", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("testrig: stream %s info: %v", name, err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("testrig: %s seq %d: %v", name, seq, err)
		}
		out = append(out, m)
	}
	return out
}

// CountBy counts the messages of the stream called name by the value of
// header h.
func (j *JetStream) CountBy(t testing.TB, name, h string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range j.Messages(t, name) {
		out[m.Header.Get(h)]++
	}
	return out
}

// LastSeq is the last sequence of the stream called name.
func (j *JetStream) LastSeq(t testing.TB, name string) uint64 {
	t.Helper()
	s, err := j.JS.Stream(context.Background(), name)
	if err != nil {
		t.Fatalf("testrig: stream %s: %v", name, err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatalf("testrig: stream %s info: %v", name, err)
	}
	return info.State.LastSeq
}

// DeliveryOf returns INTAKE_IN's first message for key as ingress
// published it (not a replay copy), as a message to publish again: what a
// holder of NATS publish rights could copy and alter.
func (j *JetStream) DeliveryOf(t testing.TB, key string) *nats.Msg {
	t.Helper()
	for _, m := range j.Messages(t, envelope.StreamIn) {
		if m.Header.Get(envelope.HeaderKey) == key && m.Header.Get(envelope.HeaderReplayID) == "" {
			h := nats.Header{}
			for k, v := range m.Header {
				h[k] = append([]string(nil), v...)
			}
			return &nats.Msg{Subject: m.Subject, Header: h, Data: m.Data}
		}
	}
	t.Fatalf("testrig: no INTAKE_IN message of %s", key)
	return nil
}
