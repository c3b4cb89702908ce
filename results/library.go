package results

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// MaxTrials bounds the trial directories read from one job.
const MaxTrials = 1 << 20

// Library is a read-only view of one or more jobs directories. It is safe
// for concurrent use; it keeps parsed trial results and reparses a trial
// only when its result.json changes (size or modification time).
type Library struct {
	roots []*root

	mu    sync.Mutex
	cache map[string]*jobCache // by root index + job name
}

type root struct {
	dir    string // as given
	tree   *tree  // the jobs directory (the parent, for a single job)
	single string // when the directory given was itself a job: its name
}

// Ref names a job in a Library: the index of its jobs directory and the
// job's directory name.
type Ref struct {
	Root int
	Name string
}

// String is "ROOT/NAME", the form ParseRef reads.
func (r Ref) String() string { return strconv.Itoa(r.Root) + "/" + r.Name }

// ParseRef reads "ROOT/NAME".
func ParseRef(s string) (Ref, error) {
	i, name, ok := strings.Cut(s, "/")
	n, err := strconv.Atoi(i)
	if !ok || err != nil || n < 0 {
		return Ref{}, errdefs.Errorf(errdefs.InvalidArgument, "job reference %q: want ROOT/NAME", s)
	}
	return Ref{Root: n, Name: name}, nil
}

// Open makes a Library over dirs. Each is a jobs directory (holding job
// directories) or one job directory (holding config.json or result.json).
func Open(dirs ...string) (*Library, error) {
	if len(dirs) == 0 {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "no jobs directory given")
	}
	l := &Library{cache: map[string]*jobCache{}}
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(abs)
		if err != nil {
			l.Close()
			return nil, errdefs.Classify(errdefs.NotFound, fmt.Errorf("jobs directory: %w", err))
		}
		if !fi.IsDir() {
			l.Close()
			return nil, errdefs.Errorf(errdefs.InvalidArgument, "%s is not a directory", d)
		}
		r := &root{dir: d}
		treeDir := abs
		if isJobDir(abs) {
			r.single = filepath.Base(abs)
			treeDir = filepath.Dir(abs)
		}
		if r.tree, err = openTree(treeDir); err != nil {
			l.Close()
			return nil, err
		}
		l.roots = append(l.roots, r)
	}
	return l, nil
}

func isJobDir(dir string) bool {
	for _, f := range []string{layout.ConfigFile, layout.ResultFile, layout.JobLogFile} {
		if fi, err := os.Lstat(filepath.Join(dir, f)); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// Close releases the directories.
func (l *Library) Close() error {
	var errs []error
	for _, r := range l.roots {
		if r.tree != nil {
			errs = append(errs, r.tree.Close())
		}
	}
	return errors.Join(errs...)
}

// Roots are the directories as given to Open.
func (l *Library) Roots() []string {
	out := make([]string, len(l.roots))
	for i, r := range l.roots {
		out[i] = r.dir
	}
	return out
}

// Refs lists every job, root by root, names sorted.
func (l *Library) Refs(ctx context.Context) []Ref {
	var out []Ref
	for i, r := range l.roots {
		if ctx.Err() != nil {
			break
		}
		if r.single != "" {
			out = append(out, Ref{Root: i, Name: r.single})
			continue
		}
		names, err := r.tree.childDirs(".", MaxTrials)
		if err != nil {
			continue
		}
		for _, n := range names {
			if isJobDir(filepath.Join(r.tree.dir, n)) {
				out = append(out, Ref{Root: i, Name: n})
			}
		}
	}
	return out
}

// resolve checks that ref names a job directory of the library.
func (l *Library) resolve(ref Ref) (*root, error) {
	if ref.Root < 0 || ref.Root >= len(l.roots) {
		return nil, errdefs.Errorf(errdefs.NotFound, "no jobs directory %d", ref.Root)
	}
	r := l.roots[ref.Root]
	if !validName(ref.Name) || (r.single != "" && ref.Name != r.single) || !r.tree.isDir(ref.Name) {
		return nil, errdefs.Errorf(errdefs.NotFound, "no job %q", ref.Name)
	}
	return r, nil
}

// validName accepts one path element: what a job or trial directory can be
// named, and nothing that walks elsewhere.
func validName(n string) bool {
	return n != "" && n != "." && n != ".." && !strings.ContainsAny(n, "/\\\x00") && len(n) <= 255
}
