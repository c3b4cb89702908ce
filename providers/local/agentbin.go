package local

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-sh/berth/agent/localagent"
	"github.com/berth-sh/berth/providers/local/container"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Where a dynamically linked agent's loader and libraries are mounted.
const (
	loaderPath = "/.berth/ld.so"
	libDir     = "/.berth/lib"
)

// launch is how the agent binary starts inside a sandbox.
type launch struct {
	// initBinary is the host file mounted at argv[0].
	initBinary string
	// argv runs the berth binary inside; "agent" and its arguments follow.
	argv []string
	// mounts are the other host files the agent needs, read-only.
	mounts []container.Mount
}

// agentLaunch resolves Options.AgentBinary. A static binary runs as
// itself. A dynamically linked one (`go build` links berth against libc
// when cgo is available) cannot use the image's libc, which may be absent
// (busybox) or another one (musl): it runs through the host's own dynamic
// loader, invoked as a program, with the host libraries it needs mounted
// read-only under /.berth/lib. Nothing of the image's /lib is touched, and
// the commands the agent starts use the image's libraries as usual.
func (o Options) agentLaunch(ctx context.Context) (launch, error) {
	p := o.AgentBinary
	if p == "" {
		exe, err := os.Executable()
		if err != nil {
			return launch{}, fmt.Errorf("find the running berth binary: %w; set %s", err, EnvAgentBinary)
		}
		p = defaultAgent(exe)
	}
	bin, err := filepath.Abs(p)
	if err != nil {
		return launch{}, err
	}
	interp, err := elfInterpreter(bin)
	if err != nil {
		return launch{}, err
	}
	if interp == "" {
		return launch{initBinary: bin, argv: []string{localagent.BinaryPath}}, nil
	}
	libs, err := neededLibs(ctx, interp, bin)
	if err != nil {
		return launch{}, errdefs.Errorf(errdefs.InvalidArgument,
			"agent binary %s is dynamically linked and its libraries cannot be found (%v); build berth with CGO_ENABLED=0 go build ./cmd/berth, or set %s to such a build", bin, err, EnvAgentBinary)
	}
	loader, err := filepath.EvalSymlinks(interp)
	if err != nil {
		return launch{}, errdefs.Errorf(errdefs.InvalidArgument, "agent binary %s: its loader: %w", bin, err)
	}
	l := launch{
		initBinary: loader,
		argv:       []string{loaderPath, "--library-path", libDir, localagent.BinaryPath},
		mounts:     []container.Mount{{Source: bin, Target: localagent.BinaryPath, ReadOnly: true}},
	}
	for name, host := range libs {
		l.mounts = append(l.mounts, container.Mount{Source: host, Target: path.Join(libDir, name), ReadOnly: true})
	}
	return l, nil
}

// AgentName is the agent binary's file name, looked for beside the
// running berth binary.
const AgentName = "berth-agent"

// defaultAgent is the agent binary when none is set: berth-agent beside
// the running binary (installed together: `go build ./cmd/...`), else the
// running binary itself, whose hidden agent verb is the same program with
// the whole CLI linked in: it works, but every sandbox's init then starts
// slower and is charged for the pages of a binary ten times the size.
func defaultAgent(exe string) string {
	if filepath.Base(exe) == AgentName {
		return exe
	}
	sibling := filepath.Join(filepath.Dir(exe), AgentName)
	if fi, err := os.Stat(sibling); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return sibling
	}
	return exe
}

// elfInterpreter returns the program interpreter (PT_INTERP) of the ELF
// executable at p, "" for a static one.
func elfInterpreter(p string) (string, error) {
	f, err := elf.Open(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", errdefs.Errorf(errdefs.InvalidArgument, "agent binary %s: %w", p, err)
		}
		return "", errdefs.Errorf(errdefs.InvalidArgument, "agent binary %s is not an ELF executable (%v); set %s to a berth binary", p, err, EnvAgentBinary)
	}
	defer f.Close()
	if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
		return "", errdefs.Errorf(errdefs.InvalidArgument, "agent binary %s is not executable", p)
	}
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return "", errdefs.Errorf(errdefs.InvalidArgument, "agent binary %s: read its interpreter: %w", p, err)
		}
		return string(bytes.TrimRight(b, "\x00")), nil
	}
	return "", nil
}

// neededLibs asks the loader which libraries bin needs, transitively (the
// loader's --list mode, which is what ldd runs, loads nothing into bin),
// and returns them by soname with their host paths, symlinks resolved.
func neededLibs(ctx context.Context, interp, bin string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, interp, "--list", bin)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w: %s", interp, err, bytes.TrimSpace(stderr.Bytes()))
	}
	libs := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)"
		name, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), " => ")
		if !ok {
			continue // the vdso and the loader itself
		}
		host, _, _ := strings.Cut(rest, " (")
		if host == "not found" || !filepath.IsAbs(host) {
			return nil, fmt.Errorf("%s not found", name)
		}
		if strings.ContainsRune(name, '/') {
			continue
		}
		real, err := filepath.EvalSymlinks(host)
		if err != nil {
			return nil, err
		}
		libs[name] = real
	}
	return libs, sc.Err()
}
