// Package passwd reads an image's /etc/passwd and /etc/group as the
// overlay of its layers shows them, for the local provider (the user a
// sandbox runs as) and the Dockerfile builder (USER, COPY --chown). Every
// read goes through package dirfd, resolved inside the layer it is read
// from: an image's symlink /etc/passwd -> /etc/shadow reads the layer's
// file of that name, never the host's.
package passwd

import (
	"bufio"
	"bytes"
	"errors"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/dirfd"
)

// Entry is one line of /etc/passwd.
type Entry struct {
	Name     string
	UID, GID uint32
}

// Lookup finds a user in passwd data by name, or by uid when name is
// numeric.
func Lookup(data []byte, name string) (Entry, bool) {
	uid, numeric := ParseID(name)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) < 4 || strings.HasPrefix(f[0], "#") {
			continue
		}
		u, ok1 := ParseID(f[2])
		g, ok2 := ParseID(f[3])
		if !ok1 || !ok2 {
			continue
		}
		if f[0] == name || (numeric && u == uid) {
			return Entry{Name: f[0], UID: u, GID: g}, true
		}
	}
	return Entry{}, false
}

// LookupGroup finds a group's gid in group data by name.
func LookupGroup(data []byte, name string) (uint32, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) >= 3 && f[0] == name {
			return ParseID(f[2])
		}
	}
	return 0, false
}

// ParseID parses a numeric uid or gid.
func ParseID(s string) (uint32, bool) {
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err == nil
}

// maxFile bounds what is read of /etc/passwd or /etc/group.
const maxFile = 1 << 20

// ReadLayered reads a file of an image as the overlay would show it: the
// top layer that has the name wins, and a whiteout (a character device)
// hides the lower ones. Each layer is read on its own, its links resolved
// inside it. A missing or unreadable file reads empty.
func ReadLayered(layers []string, name string) []byte {
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
	root, err := dirfd.Open(layer, dirfd.InRoot)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	st, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFCHR {
		return nil, errWhiteout
	}
	return root.ReadFile(name, maxFile)
}
