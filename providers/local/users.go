package local

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/berth-sh/berth/container"
	"github.com/berth-sh/berth/sandbox/types"
)

// identity is who runs what in a sandbox: the agent (the container's init)
// and the default user of commands.
type identity struct {
	agent container.User
	// user names the default user for the agent, which switches to it;
	// "" runs commands as the agent's own user.
	user string
}

// resolveUser maps a Spec's or image's user ("name", "uid", "name:group",
// "uid:gid") onto an identity, reading the image's /etc/passwd and
// /etc/group from its layers (lowest first). The agent stays root and
// switches per command when the user has a passwd entry (so Command.User
// can name another); a numeric user without one runs the agent itself as
// that uid and gid.
func resolveUser(spec string, layers []string) (identity, error) {
	if spec == "" || spec == "root" || spec == "0" || spec == "0:0" {
		return identity{}, nil
	}
	name, group, hasGroup := strings.Cut(spec, ":")
	if name == "" || (hasGroup && group == "") || strings.ContainsAny(spec, "\x00\n/") {
		return identity{}, types.Errorf(types.InvalidArgument, "user %q: want name, uid, name:group or uid:gid", spec)
	}
	passwd := readImageFile(layers, "etc/passwd")
	entry, found := lookupPasswd(passwd, name)
	uid, numeric := parseID(name)
	if !found && !numeric {
		return identity{}, types.Errorf(types.InvalidArgument, "user %q is not in the image's /etc/passwd", name)
	}
	gid := uint32(0)
	if found {
		gid = entry.gid
	}
	if hasGroup {
		g, ok := parseID(group)
		if !ok {
			if g, ok = lookupGroup(readImageFile(layers, "etc/group"), group); !ok {
				return identity{}, types.Errorf(types.InvalidArgument, "group %q is not in the image's /etc/group", group)
			}
		}
		if found && g == entry.gid {
			hasGroup = false // the user's own primary group
		}
		gid = g
	}
	if found && !hasGroup {
		if entry.uid == 0 {
			return identity{}, nil
		}
		return identity{user: entry.name}, nil
	}
	if found {
		uid = entry.uid
	}
	return identity{agent: container.User{UID: uid, GID: gid}}, nil
}

type passwdEntry struct {
	name     string
	uid, gid uint32
}

// lookupPasswd finds a user by name, or by uid when name is numeric.
func lookupPasswd(data []byte, name string) (passwdEntry, bool) {
	uid, numeric := parseID(name)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) < 4 || strings.HasPrefix(f[0], "#") {
			continue
		}
		u, ok1 := parseID(f[2])
		g, ok2 := parseID(f[3])
		if !ok1 || !ok2 {
			continue
		}
		if f[0] == name || (numeric && u == uid) {
			return passwdEntry{name: f[0], uid: u, gid: g}, true
		}
	}
	return passwdEntry{}, false
}

func lookupGroup(data []byte, name string) (uint32, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) >= 3 && f[0] == name {
			return parseID(f[2])
		}
	}
	return 0, false
}

func parseID(s string) (uint32, bool) {
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err == nil
}

// maxAccountFile bounds what is read of /etc/passwd or /etc/group.
const maxAccountFile = 1 << 20

// readImageFile reads a file of the image as the overlay would show it:
// the top layer that has the name wins, and a whiteout (a character device)
// hides the lower ones. Reads go through an os.Root per layer, so a
// symlink in a layer cannot lead out of it. A missing file reads empty.
func readImageFile(layers []string, name string) []byte {
	for i := len(layers) - 1; i >= 0; i-- {
		b, err := readInLayer(layers[i], name)
		if err == nil {
			return b
		}
		if errors.Is(err, errWhiteout) {
			return nil
		}
	}
	return nil
}

var errWhiteout = errors.New("whiteout")

func readInLayer(layer, name string) ([]byte, error) {
	root, err := os.OpenRoot(layer)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeCharDevice != 0 {
		return nil, errWhiteout
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxAccountFile))
}
