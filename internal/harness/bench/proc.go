package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is an intake process the harness started.
type child struct {
	name     string
	cmd      *exec.Cmd
	done     chan error
	log      *os.File
	stopOnce sync.Once
}

func startChild(name, bin, logPath string, env []string, args ...string) (*child, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan error, 1), log: lf}
	go func() { c.done <- cmd.Wait() }()
	return c, nil
}

// stop sends SIGTERM and waits (then SIGKILL after 20s). Calls after the
// first do nothing.
func (c *child) stop() {
	c.stopOnce.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(20 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
		c.log.Close()
	})
}

// kill sends SIGKILL (a crash: nothing is drained) and waits for the
// process to end. After kill, stop does nothing, and the other way round.
func (c *child) kill() {
	c.stopOnce.Do(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
		c.log.Close()
	})
}

// exited reports whether the process has ended.
func (c *child) exited() bool {
	select {
	case err := <-c.done:
		c.done <- err
		return true
	default:
		return false
	}
}

// peakRSS is the process's high-water resident set (VmHWM), in MiB.
func (c *child) peakRSS() float64 { return c.status("VmHWM:") }

// rss is the process's resident set now (VmRSS), in MiB.
func (c *child) rss() float64 { return c.status("VmRSS:") }

// status reads a kB field of /proc/PID/status, in MiB.
func (c *child) status(field string) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// waitReady polls url until it answers 200 or the child exits.
func (c *child) waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-c.done:
			c.done <- err
			return fmt.Errorf("%s exited during start: %v (log %s)", c.name, err, c.log.Name())
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready at %s after 60s (log %s)", c.name, url, c.log.Name())
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// cpu is the user and system time the process has used so far; 0 when
// it cannot be read.
func (c *child) cpu() time.Duration { return pidCPU(c.cmd.Process.Pid) }

// pidCPU is a process's own user and system time, from /proc/PID/stat; 0
// when it cannot be read.
func pidCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	p, err := parseStat(b)
	if err != nil {
		return 0
	}
	return time.Duration(p.utime+p.stime) * time.Second / clockTicks
}

// machineIdle is the idle time of all cores so far, from /proc/stat's
// first line (idle and iowait); 0 when it cannot be read.
func machineIdle() time.Duration {
	_, idle := machineCPU()
	return idle
}

// machineBusy is the time all cores have spent busy so far — every
// process on the host, and the kernel's work for them (loopback traffic's
// softirqs included), which no one process's account holds; 0 when
// /proc/stat cannot be read.
func machineBusy() time.Duration {
	busy, _ := machineCPU()
	return busy
}

// cpuMeter reads the machine's busy time and its parts: this process's
// (the load generator and the embedded NATS server, or a reference's
// client), a child's (the role measured; nil: none) and every Postgres
// process's (pgPID 0: none).
type cpuMeter struct {
	child *child
	pgPID int
}

// cpuReading is CPU time so far, or spent between two readings, or per
// event.
type cpuReading struct{ machine, self, child, pg time.Duration }

func (m cpuMeter) read() cpuReading {
	r := cpuReading{machine: machineBusy(), self: pidCPU(os.Getpid())}
	if m.child != nil {
		r.child = m.child.cpu()
	}
	if m.pgPID > 0 {
		r.pg, _ = postgresCPU(m.pgPID)
	}
	return r
}

func (r cpuReading) sub(o cpuReading) cpuReading {
	return cpuReading{r.machine - o.machine, r.self - o.self, r.child - o.child, r.pg - o.pg}
}

func (r cpuReading) add(o cpuReading) cpuReading {
	return cpuReading{r.machine + o.machine, r.self + o.self, r.child + o.child, r.pg + o.pg}
}

// per is r over n events (zero for none).
func (r cpuReading) per(n float64) cpuReading {
	if n <= 0 {
		return cpuReading{}
	}
	d := func(t time.Duration) time.Duration { return time.Duration(float64(t) / n) }
	return cpuReading{d(r.machine), d(r.self), d(r.child), d(r.pg)}
}

// machineCPU reads /proc/stat's first line: the busy time (user, nice,
// system, irq, softirq, steal) and the idle time (idle, iowait) of all
// cores so far; zeros when it cannot be read.
func machineCPU() (busy, idle time.Duration) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0
	}
	var busyT, idleT uint64
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0
		}
		if i == 3 || i == 4 {
			idleT += n
		} else {
			busyT += n
		}
	}
	return time.Duration(busyT) * time.Second / clockTicks, time.Duration(idleT) * time.Second / clockTicks
}
