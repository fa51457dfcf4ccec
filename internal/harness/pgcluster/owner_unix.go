//go:build unix

package pgcluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// osUser is the OS account initdb and postgres run as when we are root.
type osUser struct {
	name     string
	uid, gid int
	groups   []uint32
}

// lookupOwner returns nil when we are not root: postgres then runs as us.
// PostgreSQL refuses to run as root, so as root it runs as the user "postgres".
func lookupOwner() (*osUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: PostgreSQL refuses to run as root and there is no OS user "+
			"\"postgres\" to run it as (create one, e.g. useradd --system postgres): %w", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: OS user postgres: uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: OS user postgres: gid %q: %w", u.Gid, err)
	}
	o := &osUser{name: u.Username, uid: uid, gid: gid}
	// Supplementary groups only widen access; without them the primary group suffices.
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil {
				o.groups = append(o.groups, uint32(g))
			}
		}
	}
	return o, nil
}

// sysProcAttr runs the command as owner (when set). The server also gets its
// own process group, so that a Ctrl-C in the terminal of `intake dev` reaches
// only intake, which then stops postgres after draining its own work, and so
// that Kill can take the postmaster and its backends down with one signal.
func sysProcAttr(owner *osUser, server bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{}
	if owner != nil {
		attr.Credential = &syscall.Credential{Uid: uint32(owner.uid), Gid: uint32(owner.gid), Groups: owner.groups}
	}
	if server {
		attr.Setpgid = true
		setPdeathsig(attr)
	}
	return attr
}

// killGroup SIGKILLs postgres: the postmaster (its process group) and all
// its backends and auxiliary processes (see signalServer), and waits until
// the children are gone.
func killGroup(pgid int) error {
	kids, err := signalServer(pgid, syscall.SIGKILL)
	if err != nil {
		return fmt.Errorf("kill postgres %d: %w", pgid, err)
	}
	waitGone(kids, 10*time.Second)
	return nil
}

// signalServer sends sig to the postmaster's process group and to each of
// the postmaster's children, and returns the children. Every postgres child
// calls setsid() when it starts, so the postmaster's group holds the
// postmaster alone and a group signal reaches none of them. The postmaster
// is stopped first: it forks no child while they are found and signalled,
// and it cannot die and hand them to init before they are found.
func signalServer(pgid int, sig syscall.Signal) ([]int, error) {
	if sig != syscall.SIGCONT {
		if err := syscall.Kill(-pgid, syscall.SIGSTOP); err != nil {
			if errors.Is(err, syscall.ESRCH) {
				return nil, nil
			}
			return nil, err
		}
	}
	kids := serverChildren(pgid)
	for _, pid := range kids {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return kids, fmt.Errorf("signal backend %d: %w", pid, err)
		}
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return kids, err
	}
	return kids, nil
}

// checkReach verifies the user can search every directory from dir up to /:
// postgres needs to reach its data directory, and a root-only 0700 parent
// (t.TempDir() makes one) would otherwise fail later with a confusing
// "permission denied" from initdb.
func (u *osUser) checkReach(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if !u.maySearch(fi) {
			st := fi.Sys().(*syscall.Stat_t)
			return fmt.Errorf("PostgreSQL refuses to run as root, so it runs as OS user %s (uid %d), "+
				"which cannot enter %s (mode %04o, owner uid %d): put the data dir where that user can reach it "+
				"(for example under a fresh os.MkdirTemp(\"\", ...) dir) or allow it in (chmod o+x %s)",
				u.name, u.uid, d, fi.Mode().Perm(), st.Uid, d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// maySearch applies the Unix permission bits (ACLs aside) for the user.
func (u *osUser) maySearch(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := fi.Mode().Perm()
	switch {
	case int(st.Uid) == u.uid:
		return perm&0o100 != 0
	case int(st.Gid) == u.gid || slices.Contains(u.groups, uint32(st.Gid)):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// chownTree gives dir and everything in it to the user.
func (u *osUser) chownTree(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == u.uid && int(st.Gid) == u.gid {
			return nil
		}
		return os.Lchown(path, u.uid, u.gid)
	})
}

// signalGroup stops or continues the process group led by the postmaster.
func signalGroup(pgid int, sig groupSignal) error {
	s := syscall.SIGSTOP
	if sig == sigCont {
		s = syscall.SIGCONT
	}
	if _, err := signalServer(pgid, s); err != nil {
		return fmt.Errorf("pgcluster: signal postgres %d: %w", pgid, err)
	}
	return nil
}
