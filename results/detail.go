package results

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Detail is everything shown about one trial.
type Detail struct {
	Job   *Job
	Trial *Trial

	Instruction    *Text
	InstructionErr string

	Trajectory    *Trajectory // agent/trajectory.json (ATIF), when there
	TrajectoryErr string
	// AgentOutput are the agent's text logs (for oracle, the solution's
	// output in oracle.txt), exit-code.txt included.
	AgentOutput []*Text
	AgentFiles  []Entry
	AgentMore   bool

	VerifierOutput []*Text // test-stdout.txt, test-stderr.txt
	RewardFiles    []*Text // reward.json, reward.txt as written
	VerifierFiles  []Entry
	VerifierMore   bool

	Exception *Text // exception.txt
	TrialLog  *Text
	Errors    []string // files that could not be shown, and why

	Samples bool // samples.jsonl exists
}

// MaxTrajectoryBytes bounds the ATIF trajectory parsed for a page.
const MaxTrajectoryBytes = 16 << 20

// Trial reads one trial of a job for its page.
func (l *Library) Trial(ctx context.Context, ref Ref, name string) (*Detail, error) {
	j, err := l.Job(ctx, ref)
	if err != nil {
		return nil, err
	}
	for _, t := range j.Trials {
		if t.Name == name {
			return l.Detail(j, t), nil
		}
	}
	return nil, errdefs.Errorf(errdefs.NotFound, "no trial %q in job %s", name, ref.Name)
}

// Detail reads the files of one trial of a loaded job.
func (l *Library) Detail(j *Job, tr *Trial) *Detail {
	ref := j.Ref
	name := tr.Name
	r := l.roots[ref.Root]
	d := &Detail{Job: j, Trial: tr}
	dir := path.Join(ref.Name, name)
	read := func(rel string, limit int64) *Text {
		txt, err := r.tree.readFile(path.Join(dir, rel), limit)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				d.Errors = append(d.Errors, rel+": "+trimPrefix(err.Error(), dir))
			}
			return nil
		}
		txt.Name = rel
		return txt
	}

	d.Instruction, d.InstructionErr = instruction(tr)
	if txt := read(layout.TrajectoryFile, MaxTrajectoryBytes); txt != nil {
		d.Trajectory, d.TrajectoryErr = parseTrajectory(txt)
	}
	d.AgentFiles, d.AgentMore = r.tree.list(path.Join(dir, layout.AgentDir), 3)
	for _, e := range d.AgentFiles {
		rel := strings.TrimPrefix(e.Name, dir+"/")
		if rel == layout.TrajectoryFile || !e.File || !looksLikeLog(rel) || len(d.AgentOutput) >= 8 {
			continue
		}
		if txt := read(rel, MaxTextBytes); txt != nil {
			d.AgentOutput = append(d.AgentOutput, txt)
		}
	}
	for _, n := range []string{"verifier/test-stdout.txt", "verifier/test-stderr.txt"} {
		if txt := read(n, MaxTextBytes); txt != nil {
			d.VerifierOutput = append(d.VerifierOutput, txt)
		}
	}
	for _, n := range []string{"verifier/reward.json", "verifier/reward.txt"} {
		if txt := read(n, 64<<10); txt != nil {
			d.RewardFiles = append(d.RewardFiles, txt)
		}
	}
	d.VerifierFiles, d.VerifierMore = r.tree.list(path.Join(dir, layout.VerifierDir), 3)
	d.Exception = read(layout.ExceptionFile, MaxTextBytes)
	d.TrialLog = read(layout.TrialLogFile, MaxTextBytes)
	if f, _, err := r.tree.open(path.Join(dir, layout.SamplesFile)); err == nil {
		f.Close()
		d.Samples = true
	}
	for i := range d.AgentFiles {
		d.AgentFiles[i].Name = strings.TrimPrefix(d.AgentFiles[i].Name, dir+"/")
	}
	for i := range d.VerifierFiles {
		d.VerifierFiles[i].Name = strings.TrimPrefix(d.VerifierFiles[i].Name, dir+"/")
	}
	return d
}

func trimPrefix(msg, dir string) string { return strings.ReplaceAll(msg, dir+"/", "") }

// looksLikeLog picks the agent files worth showing inline: text logs by
// extension, and files without one (exit-code.txt, oracle.txt, command
// output).
func looksLikeLog(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".txt", ".log", ".out", ".err", "", ".md", ".json", ".jsonl", ".cast":
		return true
	}
	return false
}

// File reads one file of a trial for the raw view, at most MaxRawBytes.
func (l *Library) File(ctx context.Context, ref Ref, trialName, rel string) (*Text, error) {
	if _, err := l.resolve(ref); err != nil {
		return nil, err
	}
	if !validName(trialName) {
		return nil, errdefs.Errorf(errdefs.NotFound, "no trial %q", trialName)
	}
	r := l.roots[ref.Root]
	if !r.tree.isDir(path.Join(ref.Name, trialName)) {
		return nil, errdefs.Errorf(errdefs.NotFound, "no trial %q", trialName)
	}
	// Checked before the join, which would clean ".." away.
	if !fs.ValidPath(rel) || rel == "." {
		return nil, fmt.Errorf("%q: %w", rel, ErrBadPath)
	}
	txt, err := r.tree.readFile(path.Join(ref.Name, trialName, rel), MaxRawBytes)
	if err != nil {
		return nil, err
	}
	txt.Name = rel
	return txt, nil
}

// instruction reads instruction.md from the task directory the trial's
// config names. That directory is the user's own, outside the jobs
// directory; only that one file is read, never through a link, bounded.
func instruction(t *Trial) (*Text, string) {
	if t.Result == nil || t.Result.Config.TaskPath == "" {
		return nil, "the trial's config names no task directory"
	}
	p := filepath.Join(t.Result.Config.TaskPath, "instruction.md")
	txt, err := readOutside(p, MaxTextBytes)
	if err != nil {
		return nil, fmt.Sprintf("%s: %v", p, err)
	}
	return txt, ""
}

// readOutside reads a bounded regular file that is not a link.
func readOutside(p string, limit int64) (*Text, error) {
	lfi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !lfi.Mode().IsRegular() {
		return nil, ErrNotRegular
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !os.SameFile(lfi, fi) {
		return nil, ErrNotRegular
	}
	data, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, err
	}
	return &Text{Name: filepath.Base(p), Data: data, Size: fi.Size(), Truncated: fi.Size() > int64(len(data))}, nil
}
