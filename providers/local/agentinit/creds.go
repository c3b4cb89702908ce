package agentinit

import (
	"fmt"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/types"
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
			return nil, types.Errorf(types.InvalidArgument, "user %q: %w", name, err)
		}
		uid, err1 := strconv.Atoi(pw.Uid)
		gid, err2 := strconv.Atoi(pw.Gid)
		if err1 != nil || err2 != nil || uid < 0 || gid < 0 {
			return nil, types.Errorf(types.InvalidArgument, "user %q has a non-numeric id", name)
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
// goroutine locked to that thread and never unlocked, so the runtime ends
// the thread with the goroutine and no other goroutine ever runs on it.
// A changed fsuid also drops the file capabilities (CAP_DAC_OVERRIDE,
// CAP_CHOWN, CAP_FOWNER, ...) of that thread, as for a real user.
func asUser(a *account, fn func() error) error {
	if a == nil {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer func() {
			// The agent is PID 1: a panic here must not end the sandbox.
			if v := recover(); v != nil {
				done <- fmt.Errorf("agent: tree transfer as %s panicked: %v", a.name, v)
			}
		}()
		if err := setThreadCreds(a); err != nil {
			done <- err
			return
		}
		done <- fn()
	}()
	return <-done
}

// setThreadCreds gives the calling (locked) thread a's groups and file
// system ids.
func setThreadCreds(a *account) error {
	// unix.Setgroups is the raw system call: this thread only.
	if err := unix.Setgroups(a.groups); err != nil {
		return types.Errorf(types.Unauthenticated, "agent: acting as %s: setgroups: %w", a.name, err)
	}
	if err := unix.Setfsgid(a.gid); err != nil {
		return types.Errorf(types.Unauthenticated, "agent: acting as %s: setfsgid: %w", a.name, err)
	}
	if err := unix.Setfsuid(a.uid); err != nil {
		return types.Errorf(types.Unauthenticated, "agent: acting as %s: setfsuid: %w", a.name, err)
	}
	// setfsuid(2) and setfsgid(2) report most failures only by leaving the
	// id unchanged; an invalid id (-1) reads the current one back.
	gid, _ := unix.SetfsgidRetGid(-1)
	uid, _ := unix.SetfsuidRetUid(-1)
	if uid != a.uid || gid != a.gid {
		return types.Errorf(types.Unauthenticated, "agent: acting as %s (%d:%d): the thread's file system ids stayed %d:%d", a.name, a.uid, a.gid, uid, gid)
	}
	return nil
}
