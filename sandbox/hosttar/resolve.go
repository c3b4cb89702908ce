package hosttar

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// maxLinkHops is how many symlinks a resolution follows, as the kernel's 40.
const maxLinkHops = 40

// escape resolves the symlink at name as the kernel would for a reader of
// the finished tree, through every link the tree holds now, and says how
// it leaves the tree ("" when it stays inside). A missing element is taken
// as a directory to be: the final check runs when every entry is there.
func (x *extractor) escape(name string) string {
	var cur []string // the resolved directory, from the root
	rest := []string{path.Base(name)}
	cur = strings.Split(path.Dir(name), "/")
	if cur[0] == "." {
		cur = nil
	}
	hops := 0
	for len(rest) > 0 {
		el := rest[0]
		rest = rest[1:]
		switch el {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return "\"..\" above the tree's root"
			}
			cur = cur[:len(cur)-1]
			continue
		}
		p := strings.Join(append(cur[:len(cur):len(cur)], el), "/")
		st, err := x.root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR):
			cur = append(cur, el)
			continue
		case err != nil:
			return fmt.Sprintf("%s: %v", p, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			cur = append(cur, el)
			continue
		}
		if hops++; hops > maxLinkHops {
			return "too many levels of symlinks"
		}
		target, err := x.readlink(p)
		if err != nil {
			return fmt.Sprintf("%s: %v", p, err)
		}
		if target == "" || path.IsAbs(target) {
			return fmt.Sprintf("%s points at the absolute path %q", p, target)
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return ""
}

func (x *extractor) readlink(p string) (string, error) {
	d, base, err := x.root.Parent(p)
	if err != nil {
		return "", err
	}
	defer d.Close()
	return d.Readlink(base)
}

// classifyFS classes a host file system error by its errno, in the one
// table (errdefs.ClassifyErrno: a permission refused is Unauthenticated, a
// full disk Permanent). An error the table does not class (os.Root's
// refusal of an escape, a name it will not take) is the archive's or the
// path's doing: InvalidArgument.
func classifyFS(err error) error {
	return errdefs.Classify(errdefs.InvalidArgument, errdefs.ClassifyErrno(err))
}
