package ingress_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/provider"
	"github.com/intakehq/intake/pkg/stream"
)

// The bounds of issue 14's acceptance.
const (
	slowUploads  = 500
	rssBound     = 200 << 20
	deliveryTime = 5 * time.Second
)

// TestSlowUploadsKeepIngressSmall runs `intake ingress` as its own process
// and opens 500 uploads that each declare 1 MiB, send all but the last byte
// and stall (the per-address limit off, as from 500 addresses). The
// process's peak resident set (VmHWM) must stay under 200 MB, and a signed
// delivery sent meanwhile must get 200 within 5 s. Before issue 14 every
// upload was read into memory: well over 500 MB (the test stops the
// uploads as soon as the process passes the bound).
func TestSlowUploadsKeepIngressSmall(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc to read the process's memory")
	}
	if testing.Short() {
		t.Skip("builds and runs intake; -short")
	}
	bin := testenv.GoBuild(t, "github.com/intakehq/intake/cmd/intake")
	n := testenv.NATS(t)
	y := fmt.Sprintf(`
nats: {url: %q, publish_timeout: 2s}
ingress: {client_rate_limit: {per_second: -1}}
integrations:
  - {name: std, provider: standard, tenant: acme, secrets: ["%s"]}
`, n.URL(), whsecNew)
	cfg := testrig.ParseConfig(t, y)
	_, js := testrig.Connect(t, n.URL())
	if err := stream.Ensure(context.Background(), js, cfg.NATS.Stream); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "intake.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t)))
	cmd := exec.Command(bin, "ingress", "--config", path, "--http-addr", addr)
	var out testenv.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			cmd.Env = append(cmd.Env, kv) // the role's own GC setting is what is measured
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("intake ingress output:\n%s", out.String())
		}
	})
	client := &http.Client{Timeout: deliveryTime}
	testenv.Eventually(t, 30*time.Second, func() bool {
		resp, err := client.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "intake ingress ready")
	pid := cmd.Process.Pid
	t.Logf("ingress at rest: VmRSS %d MB", procStatus(t, pid, "VmRSS")>>20)

	// The uploads run until the test is done with them, or at once when
	// the process passes the bound (no need to push it further).
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	var over atomic.Bool
	var sampling sync.WaitGroup
	sampling.Go(func() {
		for ctx.Err() == nil {
			if procStatus(t, pid, "VmRSS") > rssBound {
				over.Store(true)
				stop()
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	var uploads sync.WaitGroup
	var refused atomic.Int64
	var written sync.WaitGroup // each upload has sent what it sends
	written.Add(slowUploads)
	body := bytes.Repeat([]byte(" "), 1<<20-1)
	for range slowUploads {
		uploads.Go(func() {
			d := net.Dialer{Timeout: 5 * time.Second}
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				written.Done()
				return
			}
			defer c.Close()
			go func() { <-ctx.Done(); c.Close() }()
			fmt.Fprintf(c, "POST /webhooks/std HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", 1<<20)
			_, _ = c.Write(body) // all but the last byte, then stall
			written.Done()
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				resp.Body.Close()
				refused.Add(1)
			}
		})
	}

	// While they stall, a genuine delivery: once every upload has sent
	// what it sends (or was refused), and the held ones have stalled a
	// while.
	allWritten := make(chan struct{})
	go func() { written.Wait(); close(allWritten) }()
	select {
	case <-ctx.Done():
	case <-allWritten:
	}
	select {
	case <-ctx.Done():
	case <-time.After(1500 * time.Millisecond):
	}
	if !over.Load() {
		req := signWith(t, "standard", whsecNew, provider.Message{ID: "msg_under_load", Body: []byte(`{"under":"load"}`), Time: time.Now()})
		hr, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks/std", bytes.NewReader(req.body))
		hr.Header = req.header
		start := time.Now()
		resp, err := client.Do(hr)
		if err != nil {
			t.Errorf("signed delivery under %d slow uploads: %v (within %s)", slowUploads, err, deliveryTime)
		} else {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("signed delivery under %d slow uploads: %d after %s, want 200", slowUploads, resp.StatusCode, time.Since(start).Round(time.Millisecond))
			}
		}
		// Let the uploads sit a little longer, then end them.
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	stop()
	uploads.Wait()
	sampling.Wait()
	peak := procStatus(t, pid, "VmHWM")
	t.Logf("%d uploads answered early (503), peak VmHWM %d MB", refused.Load(), peak>>20)
	if over.Load() || peak > rssBound {
		t.Fatalf("ingress's resident set reached %d MB under %d slow 1 MiB uploads, want under %d MB", peak>>20, slowUploads, rssBound>>20)
	}
}

// procStatus reads a size field (kB) of /proc/<pid>/status, in bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Errorf("read status of %d: %v", pid, err)
		return 0
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Errorf("%s: %q", field, v)
			}
			return kb << 10
		}
	}
	t.Errorf("no %s in /proc/%d/status", field, pid)
	return 0
}
