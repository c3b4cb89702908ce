package task

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// Defaults applied when task.toml leaves a value out (Harbor's behaviour of
// November 2025, which Terminal-Bench 2 tasks were written against).
const (
	DefaultTimeout   = 600 * time.Second
	DefaultCPUs      = 1
	DefaultMemoryMB  = 2048
	DefaultStorageMB = 10240
)

// KnownSchemas are the task.toml schema versions this loader knows.
var KnownSchemas = []string{"1.0", "1.1", "1.2", "1.3", "1.4"}

// Network modes of a task (schema 1.4 names).
const (
	NetworkPublic    = "public"
	NetworkNone      = "no-network"
	NetworkAllowlist = "allowlist"
)

// Task is one loaded task directory. A task with error Problems must not
// run; warnings are informational.
type Task struct {
	Name   string // [task].name, else the directory's base name
	Dir    string // absolute directory
	Schema string // the schema version the file was read with
	Config Config // task.toml as written (legacy fields folded in)

	Instruction string // instruction.md

	Image          string // environment.docker_image; "" when built
	Dockerfile     string // environment/Dockerfile, when present
	EnvironmentDir string // environment/, when present
	SolutionScript string // solution/solve.sh, when present
	TestScript     string // tests/test.sh, when present

	CPUs      float64
	MemoryMB  int
	StorageMB int
	GPUs      int
	// Timeouts; zero means no limit (schema 1.4 allows leaving them out).
	AgentTimeout, VerifierTimeout, BuildTimeout time.Duration
	Network                                     string // NetworkPublic, NetworkNone or NetworkAllowlist
	AllowedHosts                                []string
	Workdir                                     string

	Problems []Problem

	unreadable bool // task.toml did not parse: no point reporting what it lacks
}

// Severity of a Problem.
type Severity string

// Severities.
const (
	Error   Severity = "error"
	Warning Severity = "warning"
)

// Problem is something wrong with a task, located as precisely as the input
// allows.
type Problem struct {
	Severity Severity `json:"severity"`
	File     string   `json:"file"`            // relative to the task directory
	Line     int      `json:"line,omitempty"`  // 1-based; 0 when unknown
	Field    string   `json:"field,omitempty"` // dotted TOML key
	Message  string   `json:"message"`
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	if p.Field != "" {
		b.WriteString(": " + p.Field)
	}
	b.WriteString(": " + p.Message)
	if p.Severity == Warning {
		b.WriteString(" (warning)")
	}
	return b.String()
}

// OK reports whether the task has no error Problems.
func (t *Task) OK() bool {
	return !slices.ContainsFunc(t.Problems, func(p Problem) bool { return p.Severity == Error })
}

// Err returns the task's error Problems joined, or nil.
func (t *Task) Err() error {
	var errs []error
	for _, p := range t.Problems {
		if p.Severity == Error {
			errs = append(errs, errors.New(p.String()))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("task %s: %w", t.Name, errors.Join(errs...))
}

func (t *Task) problem(sev Severity, file string, line int, field, format string, args ...any) {
	t.Problems = append(t.Problems, Problem{Severity: sev, File: file, Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
}

// maxTaskFile bounds task.toml and instruction.md: a task file is a page or
// two, and a runner reading thousands of tasks must not be made to read a
// gigabyte by a mistake.
const maxTaskFile = 4 << 20

// Load reads the task in dir. It always returns a Task; problems are in
// Task.Problems.
func Load(dir string) *Task {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	t := &Task{Dir: abs, Name: filepath.Base(abs)}
	t.loadConfig()
	t.loadFiles()
	return t
}

func (t *Task) loadConfig() {
	data, err := readBounded(filepath.Join(t.Dir, "task.toml"))
	if err != nil {
		t.unreadable = true
		t.problem(Error, "task.toml", 0, "", "%v", err)
		t.applyDefaults()
		return
	}
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	err = dec.Decode(&t.Config)
	var strict *toml.StrictMissingError
	var derr *toml.DecodeError
	switch {
	case errors.As(err, &strict):
		// Unknown keys: written for a newer Harbor, or a typo. Tolerated.
		for _, e := range strict.Errors {
			line, _ := e.Position()
			t.problem(Warning, "task.toml", line, strings.Join(e.Key(), "."), "unknown key, ignored")
		}
	case errors.As(err, &derr):
		t.unreadable = true
		line, _ := derr.Position()
		t.problem(Error, "task.toml", line, strings.Join(derr.Key(), "."), "%s", derr.Error())
	case err != nil:
		t.unreadable = true
		t.problem(Error, "task.toml", 0, "", "%v", err)
	}
	if t.Config.Task.Name != "" {
		t.Name = t.Config.Task.Name
	}
	t.resolveSchema(data)
	t.resolveEnvironment(data)
	t.applyDefaults()
}

func (t *Task) resolveSchema(data []byte) {
	c := &t.Config
	v := c.SchemaVersion
	switch {
	case v == "" && c.Version == "":
		v = "1.0"
	case v == "":
		v = c.Version
	case c.Version != "" && c.Version != v:
		t.problem(Warning, "task.toml", lineOf(data, "version"), "version",
			"version %q differs from schema_version %q; using schema_version", c.Version, v)
	}
	if !slices.Contains(KnownSchemas, v) {
		newest := KnownSchemas[len(KnownSchemas)-1]
		key := "schema_version"
		if c.SchemaVersion == "" {
			key = "version"
		}
		t.problem(Warning, "task.toml", lineOf(data, key), key,
			"unknown schema version %q; read with the rules of %s", v, newest)
		v = newest
	}
	t.Schema = v
}

func (t *Task) resolveEnvironment(data []byte) {
	e := &t.Config.Environment
	t.Image = e.DockerImage
	t.CPUs = e.CPUs
	t.GPUs = e.GPUs
	t.Workdir = e.Workdir
	t.MemoryMB = e.MemoryMB
	t.StorageMB = e.StorageMB
	for _, f := range []struct {
		name  string
		value any
		dst   *int
	}{{"memory", e.Memory, &t.MemoryMB}, {"storage", e.Storage, &t.StorageMB}} {
		if f.value == nil {
			continue
		}
		mb, err := parseSizeMB(f.value)
		if err != nil {
			t.problem(Error, "task.toml", lineOf(data, f.name), "environment."+f.name, "%v", err)
			continue
		}
		if *f.dst == 0 {
			*f.dst = mb
		}
	}
	if t.CPUs < 0 || t.MemoryMB < 0 || t.StorageMB < 0 || t.GPUs < 0 {
		t.problem(Error, "task.toml", lineOf(data, "cpus"), "environment", "resources must not be negative")
	}

	t.Network = NetworkPublic
	if e.AllowInternet != nil && !*e.AllowInternet {
		t.Network = NetworkNone
	}
	switch e.NetworkMode {
	case "":
	case NetworkPublic, NetworkNone, NetworkAllowlist:
		t.Network = e.NetworkMode
	default:
		t.problem(Error, "task.toml", lineOf(data, "network_mode"), "environment.network_mode",
			"%q is not one of public, no-network, allowlist", e.NetworkMode)
	}
	t.AllowedHosts = e.AllowedHosts
	if t.Network == NetworkAllowlist && len(t.AllowedHosts) == 0 {
		t.problem(Error, "task.toml", lineOf(data, "network_mode"), "environment.allowed_hosts",
			"network_mode allowlist needs allowed_hosts")
	}

	for _, f := range []struct {
		name string
		v    *float64
		dst  *time.Duration
	}{
		{"agent.timeout_sec", t.Config.Agent.TimeoutSec, &t.AgentTimeout},
		{"verifier.timeout_sec", t.Config.Verifier.TimeoutSec, &t.VerifierTimeout},
		{"environment.build_timeout_sec", e.BuildTimeoutSec, &t.BuildTimeout},
	} {
		switch {
		case f.v == nil && t.Schema < "1.4":
			*f.dst = DefaultTimeout
		case f.v == nil:
			// Schema 1.4: an absent timeout means no limit.
		case *f.v <= 0:
			t.problem(Error, "task.toml", lineOf(data, f.name[strings.LastIndex(f.name, ".")+1:]), f.name,
				"timeout must be positive, got %v", *f.v)
		default:
			*f.dst = time.Duration(*f.v * float64(time.Second))
		}
	}
}

func (t *Task) applyDefaults() {
	if t.CPUs == 0 {
		t.CPUs = DefaultCPUs
	}
	if t.MemoryMB == 0 {
		t.MemoryMB = DefaultMemoryMB
	}
	if t.StorageMB == 0 {
		t.StorageMB = DefaultStorageMB
	}
	if t.Network == "" {
		t.Network = NetworkPublic
	}
}

func (t *Task) loadFiles() {
	if b, err := readBounded(filepath.Join(t.Dir, "instruction.md")); err != nil {
		t.problem(Error, "instruction.md", 0, "", "%v", err)
	} else {
		t.Instruction = string(b)
	}
	if isDir(filepath.Join(t.Dir, "environment")) {
		t.EnvironmentDir = filepath.Join(t.Dir, "environment")
	}
	if p := filepath.Join(t.Dir, "environment", "Dockerfile"); isFile(p) {
		t.Dockerfile = p
	}
	if t.Image == "" && t.Dockerfile == "" && !t.unreadable {
		for _, compose := range []string{"docker-compose.yaml", "docker-compose.yml"} {
			if isFile(filepath.Join(t.Dir, "environment", compose)) {
				t.problem(Error, "environment/"+compose, 0, "", "docker compose environments are not supported; set environment.docker_image or provide environment/Dockerfile")
				return
			}
		}
		t.problem(Error, "task.toml", 0, "environment.docker_image", "no image: set environment.docker_image or provide environment/Dockerfile")
	}
	if p := filepath.Join(t.Dir, "solution", "solve.sh"); isFile(p) {
		t.SolutionScript = p
	} else if isFile(filepath.Join(t.Dir, "solution", "solve.bat")) {
		t.problem(Warning, "solution/solve.bat", 0, "", "Windows solutions are not supported; the oracle agent cannot run this task")
	}
	if p := filepath.Join(t.Dir, "tests", "test.sh"); isFile(p) {
		t.TestScript = p
	} else {
		t.problem(Error, "tests/test.sh", 0, "", "missing: the verifier has nothing to run")
	}
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errors.New("missing")
		}
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTaskFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxTaskFile {
		return nil, fmt.Errorf("larger than %d bytes", maxTaskFile)
	}
	return b, nil
}

func isFile(p string) bool { fi, err := os.Stat(p); return err == nil && fi.Mode().IsRegular() }
func isDir(p string) bool  { fi, err := os.Stat(p); return err == nil && fi.IsDir() }

// lineOf finds the first line that assigns key, for problems the decoder
// cannot locate (values that decode but do not make sense). 0 if absent.
func lineOf(data []byte, key string) int {
	for i, line := range strings.Split(string(data), "\n") {
		l := strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(l, key); ok {
			if r := strings.TrimSpace(rest); strings.HasPrefix(r, "=") {
				return i + 1
			}
		}
	}
	return 0
}
