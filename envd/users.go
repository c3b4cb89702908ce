package envd

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// account is a resolved user.
type account struct {
	name     string
	uid, gid uint32
	groups   []uint32
	home     string
}

// users resolves user names and caches what it found; misses are not cached
// so that a user added inside the sandbox is found on the next call.
type users struct {
	mu     sync.Mutex
	byName map[string]*account
	owners map[uint32]string // uid -> name
	groups map[uint32]string // gid -> name
}

func newUsers() *users {
	return &users{byName: map[string]*account{}, owners: map[uint32]string{}, groups: map[uint32]string{}}
}

func (u *users) lookup(name string) (*account, error) {
	u.mu.Lock()
	a := u.byName[name]
	u.mu.Unlock()
	if a != nil {
		return a, nil
	}
	pw, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("user %q: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(pw.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(pw.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %q has a non-numeric id", name)
	}
	a = &account{name: name, uid: uint32(uid), gid: uint32(gid), home: pw.HomeDir}
	if ids, err := pw.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				a.groups = append(a.groups, uint32(n))
			}
		}
	}
	if a.home == "" || !filepath.IsAbs(a.home) {
		a.home = "/"
	}
	u.mu.Lock()
	u.byName[name] = a
	u.mu.Unlock()
	return a, nil
}

// ownerName and groupName give the names shown in EntryInfo; ids without a
// name are shown as numbers.
func (u *users) ownerName(uid uint32) string {
	return u.idName(uid, u.owners, func(s string) (string, error) {
		pw, err := user.LookupId(s)
		if err != nil {
			return "", err
		}
		return pw.Username, nil
	})
}

func (u *users) groupName(gid uint32) string {
	return u.idName(gid, u.groups, func(s string) (string, error) {
		g, err := user.LookupGroupId(s)
		if err != nil {
			return "", err
		}
		return g.Name, nil
	})
}

func (u *users) idName(id uint32, cache map[uint32]string, look func(string) (string, error)) string {
	u.mu.Lock()
	n, ok := cache[id]
	u.mu.Unlock()
	if ok {
		return n
	}
	s := strconv.FormatUint(uint64(id), 10)
	n, err := look(s)
	if err != nil {
		n = s
	}
	u.mu.Lock()
	cache[id] = n
	u.mu.Unlock()
	return n
}

// userFromHeader reads the user from Authorization: Basic base64("user:").
func userFromHeader(h http.Header) string {
	v := h.Get("Authorization")
	if len(v) < 6 || !strings.EqualFold(v[:6], "basic ") {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v[6:]))
	if err != nil {
		return ""
	}
	name, _, _ := strings.Cut(string(raw), ":")
	return name
}

// basicUser is the Authorization value that names user.
func basicUser(name string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(name+":"))
}

// caller is who a call acts as: a resolved account, or the server itself.
type caller struct {
	acct *account // nil: the server's own user
}

// resolveCaller picks the named user, else the default user.
func (h *host) resolveCaller(name string) (caller, error) {
	if name == "" {
		name = h.opts.DefaultUser
	}
	if name == "" {
		return caller{}, nil
	}
	a, err := h.users.lookup(name)
	if err != nil {
		return caller{}, err
	}
	return caller{acct: a}, nil
}

// home is the base of relative paths and the default working directory.
func (h *host) home(c caller) string {
	if c.acct != nil {
		return c.acct.home
	}
	if h.opts.DefaultDir != "" {
		return h.opts.DefaultDir
	}
	return "/"
}

// resolvePath makes p absolute (relative paths are taken from the caller's
// home, as envd does) and clean.
func (h *host) resolvePath(p string, c caller) (string, error) {
	if p == "" {
		return "", fmt.Errorf("path is empty")
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path contains a NUL byte")
	}
	if strings.HasPrefix(p, "~/") || p == "~" {
		p = filepath.Join(h.home(c), strings.TrimPrefix(p, "~"))
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(h.home(c), p)
	}
	return filepath.Clean(p), nil
}

// needsCredential reports whether running as a means switching ids.
func needsCredential(a *account) bool {
	return a != nil && (a.uid != uint32(os.Geteuid()) || a.gid != uint32(os.Getegid()))
}
