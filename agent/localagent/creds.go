package localagent

import (
	"fmt"
	"os"
	"os/user"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// account is the user a tree transfer acts as.
type account struct {
	name     string
	uid, gid int
	groups   []int
}

// accounts resolves user names and keeps what it found; a miss is not kept,
// so that a user added inside the sandbox is found on the next call.
type accounts struct {
	mu     sync.Mutex
	byName map[string]*account
}

// lookup returns the account of name, or nil when acting as name needs no
// switch: "" (the agent's own user) or the agent's own ids.
func (a *accounts) lookup(name string) (*account, error) {
	if name == "" {
		return nil, nil
	}
	a.mu.Lock()
	acct, ok := a.byName[name]
	a.mu.Unlock()
	if !ok {
		pw, err := user.Lookup(name)
		if err != nil {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "user %q: %w", name, err)
		}
		uid, err1 := strconv.Atoi(pw.Uid)
		gid, err2 := strconv.Atoi(pw.Gid)
		if err1 != nil || err2 != nil || uid < 0 || gid < 0 {
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "user %q has a non-numeric id", name)
		}
		acct = &account{name: name, uid: uid, gid: gid}
		if ids, err := pw.GroupIds(); err == nil {
			for _, g := range ids {
				if n, err := strconv.Atoi(g); err == nil && n >= 0 {
					acct.groups = append(acct.groups, n)
				}
			}
		}
		a.mu.Lock()
		if a.byName == nil {
			a.byName = map[string]*account{}
		}
		a.byName[name] = acct
		a.mu.Unlock()
	}
	if acct.uid == os.Geteuid() && acct.gid == os.Getegid() {
		return nil, nil
	}
	return acct, nil
}

// asUser runs fn with the file system credentials of a (nil: the agent's
// own), so that a transfer reads, writes and owns files exactly as a
// command of that user would, with no process started for it.
//
// The credentials are set on one OS thread only: setfsuid, setfsgid and the
// raw setgroups system call act on the calling thread (unlike syscall.Setuid
// and syscall.Setgroups, which Go applies to every thread). fn runs on a
// goroutine locked to that thread; no other goroutine runs there until the
// thread has the agent's own credentials back, checked (ids, groups,
// effective capabilities: a changed fsuid drops the file capabilities,
// CAP_DAC_OVERRIDE, CAP_CHOWN, CAP_FOWNER..., as for a real user, and
// setting it back restores them). Only then is the thread unlocked and
// kept: a thread the runtime ends is one it must make again later, which
// fails while a fork bomb holds every pid (threads.go). When the check
// fails the goroutine ends locked and the runtime ends the thread with it.
// asUser returns after the check.
func asUser(a *account, fn func() error) error {
	if a == nil {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := currentCreds()
		if err != nil {
			runtime.UnlockOSThread() // nothing changed yet
			done <- err
			return
		}
		var result error
		defer func() {
			// The agent is PID 1: a panic here must not end the sandbox.
			if v := recover(); v != nil {
				result = fmt.Errorf("agent: tree transfer as %s panicked: %v", a.name, v)
			}
			if restoreThreadCreds(own) {
				runtime.UnlockOSThread()
			}
			done <- result
		}()
		if result = setThreadCreds(a); result == nil {
			result = fn()
		}
	}()
	return <-done
}

// creds are a thread's file system ids, groups and effective capabilities.
type creds struct {
	fsuid, fsgid int
	groups       []int
	capEff       [2]uint32
}

// currentCreds reads the calling (locked) thread's creds.
func currentCreds() (creds, error) {
	var c creds
	groups, err := unix.Getgroups()
	if err != nil {
		return c, fmt.Errorf("agent: getgroups: %w", err)
	}
	c.groups = groups
	// An invalid id (-1) changes nothing and returns the current one.
	c.fsuid, _ = unix.SetfsuidRetUid(-1)
	c.fsgid, _ = unix.SetfsgidRetGid(-1)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3} // Pid 0: this thread
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return c, fmt.Errorf("agent: capget: %w", err)
	}
	c.capEff = [2]uint32{data[0].Effective, data[1].Effective}
	return c, nil
}

// restoreThreadCreds gives the calling (locked) thread own back and
// reports whether it has them exactly.
func restoreThreadCreds(own creds) bool {
	// fsuid first: setting it back to 0 brings the file capabilities back.
	_ = unix.Setfsuid(own.fsuid)
	_ = unix.Setfsgid(own.fsgid)
	if err := unix.Setgroups(own.groups); err != nil {
		return false
	}
	now, err := currentCreds()
	return err == nil && now.fsuid == own.fsuid && now.fsgid == own.fsgid &&
		slices.Equal(now.groups, own.groups) && now.capEff == own.capEff
}

// setThreadCreds gives the calling (locked) thread a's groups and file
// system ids.
func setThreadCreds(a *account) error {
	// unix.Setgroups is the raw system call: this thread only.
	if err := unix.Setgroups(a.groups); err != nil {
		return errdefs.Errorf(errdefs.Unauthenticated, "agent: acting as %s: setgroups: %w", a.name, err)
	}
	if err := unix.Setfsgid(a.gid); err != nil {
		return errdefs.Errorf(errdefs.Unauthenticated, "agent: acting as %s: setfsgid: %w", a.name, err)
	}
	if err := unix.Setfsuid(a.uid); err != nil {
		return errdefs.Errorf(errdefs.Unauthenticated, "agent: acting as %s: setfsuid: %w", a.name, err)
	}
	// setfsuid(2) and setfsgid(2) report most failures only by leaving the
	// id unchanged; an invalid id (-1) reads the current one back.
	gid, _ := unix.SetfsgidRetGid(-1)
	uid, _ := unix.SetfsuidRetUid(-1)
	if uid != a.uid || gid != a.gid {
		return errdefs.Errorf(errdefs.Unauthenticated, "agent: acting as %s (%d:%d): the thread's file system ids stayed %d:%d", a.name, a.uid, a.gid, uid, gid)
	}
	return nil
}
