package hostproc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/dirfd"
)

// Lookup says where LookPath looks.
type Lookup struct {
	// PATH is the command's own PATH, not this process's.
	PATH string
	// Dir is the process's working directory, as Spec.Dir: inside Root
	// when Root is set, a host path otherwise.
	Dir string
	// Root is Spec.Root: names, PATH and Dir are paths inside it, symlinks
	// in it resolve as they will inside (an absolute one from Root), and
	// the result is a path inside it.
	Root string
	// Tree, without Root, is a sandbox's tree the process does not enter
	// (its image is the host): an absolute name found in the tree runs
	// from there, any other from the host.
	Tree string
}

// LookPath finds name the way a shell does: a name with a slash is a path
// (relative to Dir), any other is searched in PATH. The error wraps
// fs.ErrNotExist when there is no such program (a shell's 127) and
// fs.ErrPermission when what is there cannot be run (126); see ShellStatus.
//
// Empty and relative PATH entries are skipped, as Go's exec.LookPath does
// (it refuses them with ErrDot) and so upstream envd: the working
// directory, which a task picks, must not decide what a bare name runs.
// A PATH entry whose file is there but not executable is passed over for
// a later one, and reported only when no entry has an executable, as bash
// does.
func LookPath(name string, l Lookup) (string, error) {
	var root *dirfd.Root
	if l.Root != "" {
		r, err := dirfd.Open(l.Root, dirfd.InRoot)
		if err != nil {
			return "", err
		}
		defer r.Close()
		root = r
	}
	if name == "" {
		return "", fmt.Errorf("empty program name: %w", fs.ErrNotExist)
	}
	if strings.Contains(name, "/") {
		return l.explicit(root, name)
	}
	denied := ""
	for _, d := range filepath.SplitList(l.PATH) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		err := executable(root, p, false)
		if err == nil {
			return p, nil
		}
		if denied == "" && errors.Is(err, fs.ErrPermission) {
			denied = p
		}
	}
	if denied != "" {
		return "", fmt.Errorf("%s is not executable: %w", denied, fs.ErrPermission)
	}
	return "", fmt.Errorf("executable %q not found in PATH: %w", name, fs.ErrNotExist)
}

// explicit checks a name with a slash.
func (l Lookup) explicit(root *dirfd.Root, name string) (string, error) {
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(l.Dir, p)
	}
	if root == nil && l.Tree != "" && filepath.IsAbs(name) {
		if in := filepath.Join(l.Tree, name); exists(in) {
			p = in
		}
	}
	if err := executable(root, p, true); err != nil {
		return "", err
	}
	return p, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// executable says whether p (inside root when root is set) can be run. A
// directory is refused as not runnable when named (bash: "Is a
// directory", 126) and passed over in a PATH search.
func executable(root *dirfd.Root, p string, named bool) error {
	var fi fs.FileInfo
	var err error
	if root != nil {
		var f *os.File
		if f, err = root.Open(p, unix.O_PATH); err == nil {
			fi, err = f.Stat()
			f.Close()
		}
	} else {
		fi, err = os.Stat(p)
	}
	switch {
	case err != nil:
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return err
		}
		return fmt.Errorf("%s: no such file: %w", p, fs.ErrNotExist)
	case fi.IsDir() && named:
		return fmt.Errorf("%s is a directory: %w", p, fs.ErrPermission)
	case fi.IsDir():
		return fmt.Errorf("%s is a directory: %w", p, fs.ErrNotExist)
	case fi.Mode()&0o111 == 0:
		return fmt.Errorf("%s is not executable: %w", p, fs.ErrPermission)
	}
	return nil
}

// ShellStatus is the exit status a shell reports for a program that
// LookPath or Start refused: 127 when there is no such program, 126 when
// it is there but cannot be run (no execute bit, a directory, not a format
// the kernel runs). ok is false for any other failure, which is the
// caller's error.
func ShellStatus(err error) (code int, ok bool) {
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, syscall.ENOEXEC), errors.Is(err, fs.ErrPermission):
		return 126, true
	case errors.Is(err, fs.ErrNotExist):
		return 127, true
	}
	return 0, false
}

// Complaint is the line a shell prints for a program it could not run
// (ShellStatus ok), newline included: "name: command not found" for 127,
// "name: " and the reason otherwise.
func Complaint(name string, err error) string {
	if code, _ := ShellStatus(err); code == 127 {
		return name + ": command not found\n"
	}
	return name + ": " + err.Error() + "\n"
}
