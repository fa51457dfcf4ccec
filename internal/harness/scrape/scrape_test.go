package scrape

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestSum(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`# TYPE m counter
m{outcome="new",integration="a"} 2
m{outcome="redelivered",integration="a"} 3
m{outcome="redelivered",integration="b c"} 4
# TYPE g gauge
g 1.5
`))
	}))
	t.Cleanup(srv.Close)
	fams, err := Families(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		match    map[string]string
		want     float64
		exported bool
	}{
		{"m", nil, 9, true},
		{"m", map[string]string{"outcome": "redelivered"}, 7, true},
		{"m", map[string]string{"outcome": "redelivered", "integration": "b c"}, 4, true},
		{"m", map[string]string{"outcome": "stale"}, 0, true},
		{"m", map[string]string{"shard": "x"}, 0, true},
		{"g", nil, 1.5, true},
		{"missing", nil, 0, false},
	} {
		if got, ok := Sum(fams, tc.name, tc.match); got != tc.want || ok != tc.exported {
			t.Errorf("Sum(%s, %v) = %v, %v; want %v, %v", tc.name, tc.match, got, ok, tc.want, tc.exported)
		}
	}
	srv.Config.Handler = http.NotFoundHandler()
	if _, err := Families(context.Background(), srv.URL); err == nil {
		t.Error("a 404 read as metrics")
	}
}
