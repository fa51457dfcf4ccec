package envelope_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/intakehq/intake/pkg/envelope"
)

var (
	keyA = []byte("envelope-key-A-0123456789abcdefghij")
	keyB = []byte("envelope-key-B-0123456789abcdefghij")
)

// signed is a delivery's message with an object version, signed with key.
func signed(key []byte) *nats.Msg {
	d := envelope.NewDelivery(envelope.Key{Integration: "demo", Account: "main", EventID: "evt_1"}, "acme", "customer.updated",
		[]byte(`{"n":1}`), time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))
	d.ObjectID, d.ObjectVersion = "cus_1", 7
	m := d.Msg()
	m.Header.Set(envelope.HeaderSignature, envelope.Sign(key, m.Header))
	return m
}

func TestSignatureCoversEveryTrustedHeader(t *testing.T) {
	if err := envelope.VerifySignature([][]byte{keyA}, signed(keyA).Header); err != nil {
		t.Fatalf("genuine: %v", err)
	}
	for _, name := range []string{envelope.HeaderKey, envelope.HeaderIntegration, envelope.HeaderAccount, envelope.HeaderEventID,
		envelope.HeaderTenant, envelope.HeaderEventType, envelope.HeaderPayloadSHA256, envelope.HeaderReceivedAt,
		envelope.HeaderObjectID, envelope.HeaderObjectVersion} {
		for _, v := range []string{"", "x", signed(keyA).Header.Get(name) + "0"} {
			m := signed(keyA)
			if v == "" {
				m.Header.Del(name)
			} else {
				m.Header.Set(name, v)
			}
			if err := envelope.VerifySignature([][]byte{keyA}, m.Header); !errors.Is(err, envelope.ErrBadSignature) {
				t.Errorf("%s = %q: %v, want ErrBadSignature", name, v, err)
			}
		}
	}
	// What the replayer rewrites on its copies, and what travels beside the
	// identity, is not covered: copies verify as their original.
	m := signed(keyA)
	for _, name := range []string{envelope.HeaderMsgID, envelope.HeaderReplayID, envelope.HeaderReplayMode, envelope.HeaderTraceparent,
		envelope.HeaderInstance, envelope.HeaderRetryHints} {
		m.Header.Set(name, "changed")
	}
	if err := envelope.VerifySignature([][]byte{keyA}, m.Header); err != nil {
		t.Errorf("a replay copy's headers: %v", err)
	}
}

// TestSignatureFieldsAreUnambiguous: moving bytes from one field to the
// next changes the signature (length-prefixed encoding).
func TestSignatureFieldsAreUnambiguous(t *testing.T) {
	a, b := signed(keyA), signed(keyA)
	a.Header.Set(envelope.HeaderObjectID, "cus_17")
	a.Header.Set(envelope.HeaderObjectVersion, "")
	b.Header.Set(envelope.HeaderObjectID, "cus_1")
	b.Header.Set(envelope.HeaderObjectVersion, "7")
	if envelope.Sign(keyA, a.Header) == envelope.Sign(keyA, b.Header) {
		t.Fatal("two header sets sign alike")
	}
}

func TestSignatureRotation(t *testing.T) {
	for _, c := range []struct {
		name   string
		signer []byte
		keys   [][]byte
		ok     bool
	}{
		{"old key signs, both verify", keyA, [][]byte{keyA, keyB}, true},
		{"new key signs, both verify", keyB, [][]byte{keyB, keyA}, true},
		{"new key signs, old pods verify", keyB, [][]byte{keyA}, false},
		{"old key removed", keyA, [][]byte{keyB}, false},
	} {
		err := envelope.VerifySignature(c.keys, signed(c.signer).Header)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestSignatureHeaderParsing(t *testing.T) {
	good := signed(keyA).Header.Get(envelope.HeaderSignature)
	for _, c := range []struct {
		name string
		vals []string
		want error
	}{
		{"none", nil, envelope.ErrUnsigned},
		{"empty", []string{""}, envelope.ErrBadSignature},
		{"no version", []string{strings.TrimPrefix(good, "v1=")}, envelope.ErrBadSignature},
		{"other version", []string{"v2=" + strings.TrimPrefix(good, "v1=")}, envelope.ErrBadSignature},
		{"padded", []string{good + "="}, envelope.ErrBadSignature},
		{"truncated", []string{good[:len(good)-1]}, envelope.ErrBadSignature},
		{"two", []string{good, good}, envelope.ErrBadSignature},
		{"unused bits set", []string{respell(good)}, envelope.ErrBadSignature},
		{"genuine", []string{good}, nil},
	} {
		m := signed(keyA)
		m.Header.Del(envelope.HeaderSignature)
		for _, v := range c.vals {
			m.Header.Add(envelope.HeaderSignature, v)
		}
		if err := envelope.VerifySignature([][]byte{keyA}, m.Header); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// respell sets the two unused low bits of v's last base64 character: the
// same MAC bytes under a lax decoder, another signature under ours.
func respell(v string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, v[len(v)-1])
	return v[:len(v)-1] + string(alphabet[i|3])
}

// FuzzVerifySignature: no header value verifies but the genuine one, and
// none panics.
func FuzzVerifySignature(f *testing.F) {
	good := signed(keyA).Header.Get(envelope.HeaderSignature)
	for _, s := range []string{good, "", "v1=", "v1=" + strings.Repeat("A", 43), "v1==", good[:10], "v2" + good[2:]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		m := signed(keyA)
		m.Header.Set(envelope.HeaderSignature, v)
		if err := envelope.VerifySignature([][]byte{keyA, keyB}, m.Header); err == nil && v != good {
			t.Fatalf("%q verifies", v)
		}
	})
}

// BenchmarkSign and BenchmarkVerifySignature are the per-delivery cost of
// signing (ingress) and verifying (processor); BenchmarkPayloadSHA256 the
// body re-hash the processor adds for every message with keys set.
func BenchmarkSign(b *testing.B) {
	h := signed(keyA).Header
	s := envelope.NewSigner(keyA) // as ingress holds it
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Sign(h)
	}
}

// A Signer's signature is Sign's, from any goroutine.
func TestSignerSignsAsSign(t *testing.T) {
	h := signed(keyA).Header
	want := envelope.Sign(keyA, h)
	s := envelope.NewSigner(keyA)
	done := make(chan string, 8)
	for range 8 {
		go func() { done <- s.Sign(h) }()
	}
	for range 8 {
		if got := <-done; got != want {
			t.Fatalf("Signer.Sign = %q, Sign = %q", got, want)
		}
	}
}

// BenchmarkVerifySignature is a fresh HMAC per message; BenchmarkVerifier
// the processor's, each key's HMAC states reused.
func BenchmarkVerifySignature(b *testing.B) {
	h := signed(keyA).Header
	keys := [][]byte{keyA}
	b.ReportAllocs()
	for b.Loop() {
		if err := envelope.VerifySignature(keys, h); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifier(b *testing.B) {
	h := signed(keyA).Header
	v := envelope.NewVerifier([][]byte{keyA}) // as the processor holds it
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Verify(h); err != nil {
			b.Fatal(err)
		}
	}
}

// A Verifier says what VerifySignature says, from any goroutine: a
// signature under either key of a rotation verifies, one under neither or
// over other headers does not.
func TestVerifierVerifiesAsVerifySignature(t *testing.T) {
	keys := [][]byte{keyA, keyB}
	v := envelope.NewVerifier(keys)
	other := signed(keyA)
	other.Header.Set(envelope.HeaderTenant, "someone-else")
	cases := []struct {
		name string
		h    nats.Header
		want error
	}{
		{"under the first key", signed(keyA).Header, nil},
		{"under the second key", signed(keyB).Header, nil},
		{"under neither", signed([]byte("not-a-key-of-ours-0123456789abcdef")).Header, envelope.ErrBadSignature},
		{"headers changed", other.Header, envelope.ErrBadSignature},
		{"unsigned", nats.Header{}, envelope.ErrUnsigned},
	}
	errs := make(chan error, 8*len(cases))
	for range 8 {
		go func() {
			for _, c := range cases {
				if got, ref := v.Verify(c.h), envelope.VerifySignature(keys, c.h); !errors.Is(got, c.want) || !errors.Is(ref, c.want) {
					errs <- fmt.Errorf("%s: Verifier %v, VerifySignature %v, want %v", c.name, got, ref, c.want)
					continue
				}
				errs <- nil
			}
		}()
	}
	for range 8 * len(cases) {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func BenchmarkPayloadSHA256(b *testing.B) {
	for _, n := range []int{1 << 10, 16 << 10} {
		body := make([]byte, n)
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				_ = envelope.PayloadSHA256(body)
			}
		})
	}
}
