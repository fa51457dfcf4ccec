package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/intakehq/intake/pkg/provider"
)

// The dispatcher stage's limit is the bare client in a process of its own
// (`intake bench bare-client`), as the dispatcher is: a client in the
// receiver's process shares one Go runtime with it — a request's write
// wakes the receiver's goroutine without another process to schedule —
// and was 8–20 % faster than the same client in its own process
// (BENCHMARKS.md, "The limit as a process of its own"). The client in
// the receiver's process still runs beside it, shown without a target.

// bareClient is the limit's HTTP client, tuned as the dispatcher's own
// transport is where the tuning is not Intake's work: the load
// generator's client (idle connections for every request in flight),
// writing a request's headers and body up to 64 KiB in one write (the default 4 KiB buffer took five writes for a
// 16 KiB body where the dispatcher takes one).
func bareClient(conns int) *http.Client {
	c := newClient(conns)
	c.Transport.(*http.Transport).WriteBufferSize = 64 << 10
	return c
}

// BareClientConfig is one pass of the bare client in its own process.
type BareClientConfig struct {
	URL         string
	Size        int // body bytes
	Connections int
	Duration    time.Duration
	Prefix      string // of the bodies' ids
}

// bareClientResult is what the process reports after its pass.
type bareClientResult struct {
	Sent        int     `json:"sent"`
	CPUNanos    int64   `json:"cpu_ns"` // its own user and system time while posting
	LatenciesUS []int64 `json:"latencies_us"`
	Error       string  `json:"error,omitempty"`
}

// RunBareClient is `intake bench bare-client`: it writes "ready" to out,
// waits for a line on in (the harness reads the machine's CPU in
// between, so the process's start is not the pass's cost), posts for
// c.Duration, and writes its result as one JSON line.
func RunBareClient(ctx context.Context, c BareClientConfig, in io.Reader, out io.Writer) error {
	client := bareClient(c.Connections)
	defer client.CloseIdleConnections()
	reqs := newRequests("", provider.Config{}, c.Size, "")
	if _, err := fmt.Fprintln(out, "ready"); err != nil {
		return err
	}
	if _, err := bufio.NewReader(in).ReadString('\n'); err != nil {
		return fmt.Errorf("bare client: waiting for the start: %w", err)
	}
	cpu0 := pidCPU(os.Getpid())
	lat, err := postFor(ctx, client, c.URL, reqs, c.Prefix, 1<<30, c.Connections, time.Now().Add(c.Duration))
	res := bareClientResult{Sent: len(lat), CPUNanos: int64(pidCPU(os.Getpid()) - cpu0), LatenciesUS: make([]int64, len(lat))}
	for i, l := range lat {
		res.LatenciesUS[i] = l.Microseconds()
	}
	if err != nil {
		res.Error = err.Error()
	}
	return json.NewEncoder(out).Encode(res)
}

// bareProcessRun is one pass of the bare client as its own process,
// posting to rc for d.
func (d *dispatchRun) bareProcessRun(ctx context.Context, rc *receiver, size, conns int, prefix string, dur time.Duration) (dispatchPass, error) {
	logf, err := os.Create(filepath.Join(d.env.dir, "bare-client-"+prefix+".log"))
	if err != nil {
		return dispatchPass{}, err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, d.c.Binary, "bench", "bare-client", "--url", rc.url(), "--payload", strconv.Itoa(size),
		"--connections", strconv.Itoa(conns), "--duration", dur.String(), "--prefix", prefix)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return dispatchPass{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return dispatchPass{}, err
	}
	if err := cmd.Start(); err != nil {
		return dispatchPass{}, fmt.Errorf("start the bare client: %w", err)
	}
	defer func() { _ = cmd.Wait() }()
	defer stdin.Close()
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		_ = cmd.Process.Kill()
		return dispatchPass{}, fmt.Errorf("bare client did not start (log %s): %q %v", logf.Name(), line, err)
	}
	rc.reset()
	cpu0 := cpuMeter{}.read()
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		return dispatchPass{}, err
	}
	var res bareClientResult
	if err := json.NewDecoder(out).Decode(&res); err != nil {
		_ = cmd.Process.Kill()
		return dispatchPass{}, fmt.Errorf("bare client's result (log %s): %w", logf.Name(), err)
	}
	cpu := cpuMeter{}.read().sub(cpu0)
	if res.Error != "" {
		return dispatchPass{}, fmt.Errorf("bare client: %s", res.Error)
	}
	got, first, last := rc.count()
	if got == 0 {
		return dispatchPass{}, errors.New("bare client: the receiver got nothing")
	}
	if got != res.Sent {
		return dispatchPass{}, fmt.Errorf("bare client: %d sent and answered 204, the receiver counted %d", res.Sent, got)
	}
	p := dispatchPass{n: got, secs: last.Sub(first).Seconds(), cpu: time.Duration(res.CPUNanos), self: cpu.self, machine: cpu.machine,
		lat: make([]time.Duration, len(res.LatenciesUS))}
	for i, us := range res.LatenciesUS {
		p.lat[i] = time.Duration(us) * time.Microsecond
	}
	return p, nil
}
