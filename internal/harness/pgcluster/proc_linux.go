package pgcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// setPdeathsig makes the kernel send postgres SIGINT, its fast shutdown, when
// the thread that started it exits (see startProcess): a clean shutdown with
// a checkpoint, so a dev data directory needs no recovery afterwards.
func setPdeathsig(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGINT }

// inspectPID tells what pid, found in dir's postmaster.pid, is now.
func inspectPID(pid int, dir string) pidState {
	state, _, ok := procStat(pid)
	if !ok {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, fs.ErrNotExist) {
			return pidGone
		}
		return pidUnknown
	}
	// kill(pid, 0) succeeds on a zombie, so postgres would take it for a
	// running postmaster; but a zombie serves nothing.
	if state == 'Z' {
		return pidOther
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return pidUnknown // not ours to inspect
	}
	// A postmaster runs with its data directory as working directory.
	if real, err := filepath.EvalSymlinks(dir); err == nil && cwd == real {
		return pidPostmaster
	}
	return pidOther
}

// waitGroupGone waits until no live (non-zombie) process is left in the
// process group. Zombies are ignored: killed backends are reparented to init,
// which may reap them late, and they no longer hold shared memory.
func waitGroupGone(pgid int, timeout time.Duration) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for groupHasLiveMember(pgid) {
		select {
		case <-tick.C:
		case <-deadline:
			return
		}
	}
}

func groupHasLiveMember(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, pgrp, ok := procStat(pid); ok && pgrp == pgid && state != 'Z' {
			return true
		}
	}
	return false
}

// serverChildren lists the processes whose parent is pid.
func serverChildren(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var kids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := procParent(child); ok && ppid == pid {
			kids = append(kids, child)
		}
	}
	return kids
}

// waitGone waits until none of pids is a live (non-zombie) process, at most
// timeout.
func waitGone(pids []int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for _, pid := range pids {
		for time.Now().Before(deadline) {
			if state, _, ok := procStat(pid); !ok || state == 'Z' {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// procParent reads the parent pid from /proc/PID/stat.
func procParent(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	return ppid, err == nil
}

// procStat reads state and process group from /proc/PID/stat. The command
// name in parentheses may contain spaces, so fields are counted after the
// last ')': state ppid pgrp ...
func procStat(pid int) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 3 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	pgrp, err = strconv.Atoi(string(fields[2]))
	if err != nil {
		return 0, 0, false
	}
	return fields[0][0], pgrp, true
}
