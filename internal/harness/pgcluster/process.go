package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"time"
)

// process is one run of the postmaster.
type process struct {
	cmd     *exec.Cmd
	pid     int
	done    chan struct{} // closed once postgres has exited and been reaped
	waitErr error         // cmd.Wait's result; read only after done is closed
	logFile *os.File      // postgres' stdout and stderr; closed by release
}

// startProcess starts postgres directly as our child instead of through
// pg_ctl, which would daemonise it and so leave it running forever if this
// process died. As a child it gets a parent-death signal (Linux, see
// setPdeathsig), so a crashed `intake dev` or a test binary killed by its
// timeout takes its postgres down with it.
//
// The kernel sends that signal when the OS thread that forked the child
// exits, not the process. So the fork happens on a goroutine locked to its
// thread, and that goroutine lives exactly as long as postgres: it waits for
// the exit and reaps the child. It never unlocks, so the Go runtime discards
// the thread afterwards instead of reusing it.
func startProcess(cmd *exec.Cmd) (*process, error) {
	p := &process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	p.pid = cmd.Process.Pid
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// shutdown asks postgres for a fast shutdown (SIGINT) and waits for the exit;
// when ctx ends first it kills postgres.
func (p *process) shutdown(ctx context.Context) error {
	if p.exited() {
		p.release()
		return fmt.Errorf("postgres had already exited: %v", p.waitErr)
	}
	// os.Process.Signal goes through a pidfd on Linux, so it cannot hit a
	// reused pid.
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		_ = p.kill()
		return fmt.Errorf("request fast shutdown: %w; killed postgres", err)
	}
	select {
	case <-p.done:
		p.release()
		if p.waitErr != nil {
			return fmt.Errorf("postgres exited uncleanly: %w", p.waitErr)
		}
		return nil
	case <-ctx.Done():
		if err := p.kill(); err != nil {
			return fmt.Errorf("fast shutdown did not finish (%w), and kill failed: %w", ctx.Err(), err)
		}
		return fmt.Errorf("fast shutdown did not finish, killed postgres: %w", ctx.Err())
	}
}

// kill crashes postgres and waits until the postmaster and its backends are
// gone. Backends must be gone too: one still attached to the old shared
// memory makes the next start refuse to run.
func (p *process) kill() error {
	defer p.release()
	if !p.exited() {
		if err := killGroup(p.pid); err != nil {
			return err
		}
		<-p.done
	}
	waitGroupGone(p.pid, 10*time.Second)
	return nil
}

// release closes our copy of the log file; postgres keeps its own until it exits.
func (p *process) release() { _ = p.logFile.Close() }

// pidState is what the pid recorded in a leftover postmaster.pid is now.
type pidState int

const (
	pidGone       pidState = iota // no such process: postgres takes the lock file over itself
	pidPostmaster                 // a live postgres serving this data directory
	pidOther                      // the pid was reused by an unrelated process (or is a zombie)
	pidUnknown                    // cannot tell: leave the decision to postgres
)
