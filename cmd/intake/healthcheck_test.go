package main

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHealthcheckExitCodes: 2xx exits 0; anything else exits 1 and says why.
func TestHealthcheckExitCodes(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte("nats: not connected\n"))
	}))
	t.Cleanup(srv.Close)

	run := func(args ...string) (string, error) {
		root := newRoot()
		var stderr bytes.Buffer
		root.SetErr(&stderr)
		root.SetArgs(append([]string{"healthcheck"}, args...))
		err := root.Execute()
		return stderr.String(), err
	}
	if out, err := run("--url", srv.URL+"/readyz"); err != nil {
		t.Fatalf("200: %v %s", err, out)
	}
	status = http.StatusServiceUnavailable
	out, err := run("--url", srv.URL+"/readyz")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(out, "503") || !strings.Contains(out, "nats: not connected") {
		t.Fatalf("503: err %v, stderr %q", err, out)
	}

	// Without --url: the config's http.internal_addr, on loopback.
	status = http.StatusOK
	cfg := filepath.Join(t.TempDir(), "intake.yaml")
	addr := ":" + srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	if err := os.WriteFile(cfg, []byte("http: {internal_addr: \""+addr+"\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run("--config", cfg); err != nil {
		t.Fatalf("from the config: %v %s", err, out)
	}
}

func TestReadyzURL(t *testing.T) {
	for in, want := range map[string]string{
		":9100":          "http://127.0.0.1:9100/readyz",
		"0.0.0.0:9100":   "http://127.0.0.1:9100/readyz",
		"[::]:9100":      "http://127.0.0.1:9100/readyz",
		"127.0.0.1:9101": "http://127.0.0.1:9101/readyz",
		"[::1]:9102":     "http://[::1]:9102/readyz",
	} {
		if got, err := readyzURL(in); err != nil || got != want {
			t.Errorf("readyzURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := readyzURL(""); err == nil {
		t.Error("readyzURL(\"\") = nil error")
	}
}
