package chaos

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRedrivenFromMetrics(t *testing.T) {
	for _, tc := range []struct {
		name    string
		metrics string
		want    int
		err     bool
	}{
		{"plain", "# TYPE intake_redriven_events_total counter\nintake_redriven_events_total 7\n", 7, false},
		{"summed over labels", "intake_redriven_events_total{integration=\"a\"} 2\nintake_redriven_events_total{integration=\"b c\"} 3\n", 5, false},
		{"other metrics only", "intake_redriven_events_totally 1\nintake_replays_total 4\n", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(tc.metrics))
			}))
			t.Cleanup(srv.Close)
			got, err := redrivenFromMetrics(context.Background(), strings.TrimPrefix(srv.URL, "http://"))
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("got %d, %v; want %d, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}
