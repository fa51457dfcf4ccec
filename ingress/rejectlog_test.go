package ingress_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/intakehq/intake/internal/harness/testenv"
)

// Issue 30: one log line per rejected request let a flood of unsigned
// requests write the log's volume (10,726 lines in 4 s). The lines are now
// rate-limited per integration and reason; the counter still counts each.
func TestARejectionFloodWritesBoundedLogs(t *testing.T) {
	var logs testenv.Buffer
	r := startRigLog(t, fmt.Sprintf(testIngressY, whpk), 0, slog.New(slog.NewTextHandler(&logs, nil)))
	const flood = 300
	for i := range flood {
		req := request{header: http.Header{}, body: []byte(fmt.Sprintf(`{"n":%d}`, i))}
		// 401 until the address's bucket is empty, then 429: both
		// rejections, each logged once at most.
		if a := r.post("gh", req); a.code != http.StatusUnauthorized && a.code != http.StatusTooManyRequests {
			t.Fatalf("unsigned request %d: %d %s, want 401 or 429", i, a.code, a.raw)
		}
	}
	lines := strings.Count(logs.String(), `msg="webhook rejected"`)
	// 5 a second per integration and reason (two reasons here): the flood
	// takes a second or two, far fewer lines than requests.
	if lines < 5 || lines >= flood/3 {
		t.Fatalf("%d \"webhook rejected\" lines for %d rejections; want a few (rate-limited)\n%s", lines, flood, logs.String())
	}
	if got := testutil.CollectAndCount(r.metrics.Rejected); got == 0 {
		t.Fatal("no rejection counted")
	}
	var counted float64
	for _, reason := range []string{"missing_header", "client_rate_limited"} {
		counted += testutil.ToFloat64(r.metrics.Rejected.WithLabelValues("gh", reason))
	}
	if counted != flood {
		t.Fatalf("intake_ingress_rejected_total{gh} = %v over missing_header and client_rate_limited, want %d: every rejection counted\n%s", counted, flood, logs.String())
	}
}
