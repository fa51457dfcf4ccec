package chaos

import "syscall"

// childAttr gives every child a parent-death signal: a harness that dies
// (or a test binary killed by its timeout) takes its children with it. The
// kernel sends it when the forking thread exits, so children are started
// from a goroutine locked to its thread that lives as long as the child.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
