package replayer

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/intakehq/intake/pkg/config"
)

// bareReplayer has no stream or store: what these tests call must refuse
// before it needs them.
func bareReplayer(o Options) *Replayer {
	o = o.WithDefaults()
	return &Replayer{o: o, reconciles: make(chan struct{}, o.MaxReconciles), viewerReconcile: make(chan struct{}, 1)}
}

func TestReconcileRefusesARangeWiderThanItsSpan(t *testing.T) {
	r := bareReplayer(Options{ReconcileMaxSpan: 1000, ReconcileViewerMaxSpan: 100})
	for _, tt := range []struct {
		req  ReconcileRequest
		want error
	}{
		{ReconcileRequest{FromSeq: 1, ToSeq: 1001}, ErrSpanTooLarge},
		{ReconcileRequest{FromSeq: 1, ToSeq: 101, MaxSpan: 100}, ErrSpanTooLarge},
		{ReconcileRequest{FromSeq: 1, ToSeq: 1001, MaxSpan: 5000}, ErrSpanTooLarge}, // MaxSpan only lowers
	} {
		if _, err := r.Reconcile(context.Background(), tt.req); !errors.Is(err, tt.want) {
			t.Errorf("%+v: err = %v, want %v", tt.req, err, tt.want)
		}
	}
}

func TestReconcilesAreBounded(t *testing.T) {
	r := bareReplayer(Options{MaxReconciles: 2})
	r.reconciles <- struct{}{}
	r.reconciles <- struct{}{} // two running
	if _, err := r.Reconcile(context.Background(), ReconcileRequest{FromSeq: 1, ToSeq: 10}); !errors.Is(err, ErrBusy) {
		t.Fatalf("third reconcile: err = %v, want ErrBusy", err)
	}
}

// TestReconcileAPIBounds: a viewer gets the smaller span (422 saying the
// bound); a reconcile beyond MaxReconciles gets 429 with Retry-After.
func TestReconcileAPIBounds(t *testing.T) {
	r := bareReplayer(Options{ReconcileMaxSpan: 1000, ReconcileViewerMaxSpan: 100, MaxReconciles: 1, Tokens: []config.Token{
		{Name: "viewer", Token: "viewer-token-0123456789", Role: config.RoleViewer},
		{Name: "ops", Token: "operator-token-0123456789", Role: config.RoleOperator},
	}})
	mux := chi.NewRouter()
	r.Mount(mux)
	get := func(token, query string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/reconcile?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return w
	}
	w := get("viewer-token-0123456789", "from_seq=1&to_seq=500")
	if w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "more than 100 stream messages") {
		t.Fatalf("viewer, 500 sequences: %d %s", w.Code, w.Body)
	}
	r.reconciles <- struct{}{} // one running: the most
	w = get("operator-token-0123456789", "from_seq=1&to_seq=500")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("operator while one runs: %d %s", w.Code, w.Body)
	}
	if ra, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After = %q", w.Header().Get("Retry-After"))
	}
	w = get("operator-token-0123456789", "from_seq=1&to_seq=5000")
	if w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "more than 1000 stream messages") {
		t.Fatalf("operator, 5000 sequences: %d %s", w.Code, w.Body)
	}
}
