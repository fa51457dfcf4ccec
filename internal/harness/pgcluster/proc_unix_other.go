//go:build unix && !linux

package pgcluster

import (
	"errors"
	"syscall"
	"time"
)

// setPdeathsig does nothing: only Linux has a parent-death signal. Here a
// postgres outlives a Go process that dies without Stop; the next Start on
// the same data directory then reports it (pid and directory) so it can be
// stopped by hand.
func setPdeathsig(*syscall.SysProcAttr) {}

// inspectPID can only tell a vanished pid apart; everything else is left to
// postgres' own lock-file check.
func inspectPID(pid int, _ string) pidState {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return pidGone
	}
	return pidUnknown
}

// waitGroupGone waits until the process group is empty (zombies included,
// as there is no portable way to tell them apart), at most timeout.
func waitGroupGone(pgid int, timeout time.Duration) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
		select {
		case <-tick.C:
		case <-deadline:
			return
		}
	}
}

// serverChildren finds nothing here: postgres' children, each in a session
// of its own, are reached only through the postmaster.
func serverChildren(int) []int { return nil }

func waitGone([]int, time.Duration) {}
