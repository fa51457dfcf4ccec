//go:build !linux

package chaos

import "syscall"

// childAttr: no parent-death signal outside Linux; the harness stops its
// children itself.
func childAttr() *syscall.SysProcAttr { return nil }
