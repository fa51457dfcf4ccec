package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// child is one OS process of the system under test (a nats node, an
// ingress, a processor) that the harness starts, kills and starts again.
// Its stdout and stderr go to a log file in the run directory, appended
// across restarts.
type child struct {
	name    string
	bin     string
	args    func() []string // evaluated at every start: ports may change
	logPath string
	env     []string                        // added to the harness's environment
	ready   func(ctx context.Context) error // nil: started is ready

	mu       sync.Mutex
	port     int       // HTTP port of a role (ingress, processor); 0 for NATS nodes
	run      *childRun // nil until the first start
	wanted   bool      // false after Kill/Stop until the next Start: an exit is expected
	starting bool      // Start is waiting for ready: an exit now is Start's to report
}

// childRun is one run of a child.
type childRun struct {
	cmd     *exec.Cmd
	pid     int
	done    chan struct{} // closed once the process has exited and been reaped
	waitErr error
}

func (r *childRun) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Start starts the child and waits until ready answers (or the process
// exits, or ctx ends). A child that is running is left alone.
func (c *child) Start(ctx context.Context) error {
	args := c.args()
	c.mu.Lock()
	if c.run != nil && !c.run.exited() {
		c.mu.Unlock()
		return nil
	}
	logFile, err := os.OpenFile(c.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		c.mu.Unlock()
		return fmt.Errorf("%s: log: %w", c.name, err)
	}
	fmt.Fprintf(logFile, "\n=== chaos: start %s %v at %s\n", c.bin, args, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(c.bin, args...)
	if c.env != nil {
		cmd.Env = append(os.Environ(), c.env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childAttr()
	r := &childRun{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal follows the forking thread (see
		// childAttr): this goroutine holds it until the child is gone and
		// never unlocks, so the runtime retires the thread afterwards.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		r.waitErr = cmd.Wait()
		logFile.Close()
		close(r.done)
	}()
	if err := <-started; err != nil {
		logFile.Close()
		c.mu.Unlock()
		return fmt.Errorf("%s: start: %w", c.name, err)
	}
	r.pid = cmd.Process.Pid
	c.run, c.wanted, c.starting = r, true, c.ready != nil
	c.mu.Unlock()

	if c.ready == nil {
		return nil
	}
	defer func() {
		c.mu.Lock()
		c.starting = false
		c.mu.Unlock()
	}()
	readyCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.done:
			cancel()
		case <-readyCtx.Done():
		}
	}()
	if err := c.ready(readyCtx); err != nil {
		if r.exited() {
			c.mu.Lock()
			c.wanted = false // the caller sees this exit; it is no crash to supervise
			c.mu.Unlock()
			return fmt.Errorf("%w (%v): %s", errExitedEarly, r.waitErr, lastLine(c.logPath))
		}
		return fmt.Errorf("%s not ready: %w; see %s", c.name, err, c.logPath)
	}
	return nil
}

// addr is the role's HTTP address.
func (c *child) addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return loopback(c.port)
}

// Kill sends SIGKILL and waits until the process is reaped.
func (c *child) Kill() error {
	if err := c.Signal(syscall.SIGKILL, true); err != nil {
		return err
	}
	c.Exited(time.Hour)
	return nil
}

// Signal sends sig. When fatal, the exit that follows is expected (not
// counted as a crash); Signal does not wait for it.
func (c *child) Signal(sig os.Signal, fatal bool) error {
	c.mu.Lock()
	r := c.run
	if r == nil || r.exited() {
		c.mu.Unlock()
		return fmt.Errorf("%s is not running", c.name)
	}
	if fatal {
		c.wanted = false
	}
	c.mu.Unlock()
	if err := r.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: signal %v: %w", c.name, sig, err)
	}
	return nil
}

// Stop asks the process to shut down (SIGTERM, which every intake role
// handles by draining) and kills it if it has not exited within grace.
func (c *child) Stop(grace time.Duration) {
	c.mu.Lock()
	r := c.run
	c.wanted = false
	c.mu.Unlock()
	if r == nil || r.exited() {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(grace):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

// Exited waits up to d for the current run to exit and reports whether it did.
func (c *child) Exited(d time.Duration) bool {
	c.mu.Lock()
	r := c.run
	c.mu.Unlock()
	if r == nil {
		return true
	}
	select {
	case <-r.done:
		return true
	case <-time.After(d):
		return false
	}
}

// Running reports whether the current run is alive.
func (c *child) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.run != nil && !c.run.exited()
}

// Pid is the current run's process id (0 before the first start).
func (c *child) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run == nil {
		return 0
	}
	return c.run.pid
}

// unexpectedExit reports (once) a run that ended without Kill or Stop, with
// its exit status, so a supervisor can count it and start the child again.
func (c *child) unexpectedExit() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run == nil || !c.wanted || c.starting || !c.run.exited() {
		return false, nil
	}
	c.wanted = false
	return true, c.run.waitErr
}

// errExitedEarly: the process exited before it was ready.
var errExitedEarly = errors.New("exited before it was ready")

// lastLine returns the last non-empty line of a log file (at most 300 bytes).
func lastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	l := lines[len(lines)-1]
	if len(l) > 300 {
		l = l[:300] + "…"
	}
	return l
}

// httpReady polls http://addr/readyz until it answers 200.
func httpReady(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		url := "http://" + addr + "/readyz"
		return poll(ctx, 50*time.Millisecond, func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("readyz: %s", resp.Status)
			}
			return nil
		})
	}
}

// poll calls f every interval until it succeeds or ctx ends; the error
// then carries f's last error.
func poll(ctx context.Context, interval time.Duration, f func() error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// portPool hands out loopback ports that were free a moment ago and that it
// never handed out before in this run. The kernel offers a probed port again
// as soon as the probe closes, so two ports picked one after the other may
// be the same: the pool holds its probes open while it picks and remembers
// what it gave.
type portPool struct {
	mu   sync.Mutex
	used map[int]bool
}

func (p *portPool) take() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used == nil {
		p.used = map[int]bool{}
	}
	var probes []net.Listener
	defer func() {
		for _, l := range probes {
			l.Close()
		}
	}()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("pick a free port: %w", err)
		}
		probes = append(probes, l)
		if port := l.Addr().(*net.TCPAddr).Port; !p.used[port] {
			p.used[port] = true
			return port, nil
		}
	}
	return 0, errors.New("pick a free port: every port offered was handed out before")
}

// natsReady polls until a client connects at addr and finds the server
// named name there (not some other listener on a reused port), as user.
func natsReady(addr, name, user, password string) func(context.Context) error {
	return func(ctx context.Context) error {
		return poll(ctx, 100*time.Millisecond, func() error {
			nc, err := nats.Connect("nats://"+addr, nats.UserInfo(user, password), nats.Timeout(time.Second), nats.NoReconnect())
			if err != nil {
				return err
			}
			defer nc.Close()
			if got := nc.ConnectedServerName(); got != name {
				return fmt.Errorf("%s answers as %q, not %q", addr, got, name)
			}
			return nil
		})
	}
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
