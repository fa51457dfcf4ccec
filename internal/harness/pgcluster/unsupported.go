//go:build !unix

package pgcluster

import (
	"errors"
	"syscall"
	"time"
)

// Private clusters need Unix process control (process groups, signals,
// credentials). Elsewhere Start fails and `intake dev` needs DATABASE_URL.

type osUser struct {
	name     string
	uid, gid int
}

func lookupOwner() (*osUser, error) {
	return nil, errors.New("pgcluster: private PostgreSQL clusters are supported on Unix only; set DATABASE_URL")
}

func (*osUser) checkReach(string) error { return nil }
func (*osUser) chownTree(string) error  { return nil }

func sysProcAttr(*osUser, bool) *syscall.SysProcAttr { return nil }

func killGroup(int) error { return errors.New("not supported") }

func inspectPID(int, string) pidState { return pidUnknown }

func waitGroupGone(int, time.Duration) {}

func signalGroup(int, groupSignal) error { return errors.New("not supported") }
