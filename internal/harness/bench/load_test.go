package bench

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/intakehq/intake/pkg/provider"
)

func TestRequestsAreSignedBodiesOfTheAskedSize(t *testing.T) {
	cfg := provider.Config{Provider: "standard", Secrets: []string{benchSecret}}
	v, err := provider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1024, 16384} {
		r := newRequests("http://127.0.0.1/x", cfg, size, "t")
		req, id, err := r.make(7)
		if err != nil {
			t.Fatal(err)
		}
		body := r.body(id)
		if len(body) != size {
			t.Fatalf("body of %d bytes, want %d", len(body), size)
		}
		var doc map[string]any
		if err := json.Unmarshal(body, &doc); err != nil || doc["id"] != id {
			t.Fatalf("body is not the event's JSON: %v", err)
		}
		ev, err := v.Verify(&provider.Request{Header: req.Header, Body: body, Now: time.Now()})
		if err != nil || ev.ID != id {
			t.Fatalf("generator request does not verify: %v (id %q)", err, ev.ID)
		}
	}
}

func TestPercentiles(t *testing.T) {
	var l loadResult
	for i := 100; i >= 1; i-- {
		l.Latencies = append(l.Latencies, time.Duration(i)*time.Millisecond)
	}
	if got := l.pct(.5); got != 51*time.Millisecond {
		t.Errorf("p50 = %v", got)
	}
	if got := l.pct(.99); got != 100*time.Millisecond {
		t.Errorf("p99 = %v", got)
	}
	if (loadResult{}).pct(.99) != 0 {
		t.Error("empty result has a percentile")
	}
}
