package task

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeTask makes a task directory with the given task.toml and the files a
// runnable task has; extra maps relative paths to contents ("" deletes).
func writeTask(t *testing.T, toml string, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"task.toml":          toml,
		"instruction.md":     "Do the thing.\n",
		"solution/solve.sh":  "#!/bin/sh\necho done\n",
		"tests/test.sh":      "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n",
		"environment/README": "context\n",
	}
	for k, v := range extra {
		files[k] = v
	}
	for name, body := range files {
		if body == "" && name != "task.toml" {
			continue
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSamples loads task.toml files exactly as authors published them and
// checks the reading given in the samples' README.
func TestSamples(t *testing.T) {
	cases := []struct {
		file                 string
		cpus                 float64
		memMB, storMB        int
		agentSec, verifySec  float64
		image                string
		dockerfile, internet bool
	}{
		{"consul-catalog-nodeid-acl-bypass", 2, 4096, 10240, 5400, 900, "golang:1.26-bookworm", false, false},
		{"semantic-router-eval-integrity", 4, 8192, 20480, 5400, 900, "python:3.12-slim", false, false},
		{"bash-pam-stack-auth-path-simulator", 2, 4096, 10240, 1800, 900, "", true, false},
		{"gpt2-codegolf", 1, 4096, 10240, 900, 900, "alexgshaw/gpt2-codegolf:20251031", false, true},
		{"cancel-async-tasks", 1, 2048, 10240, 900, 900, "alexgshaw/cancel-async-tasks:20251031", false, true},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "samples", c.file+".toml"))
			if err != nil {
				t.Fatal(err)
			}
			extra := map[string]string{}
			if c.dockerfile {
				extra["environment/Dockerfile"] = "FROM debian:bookworm-slim\n"
			}
			tk := Load(writeTask(t, string(raw), extra))
			if !tk.OK() {
				t.Fatalf("problems: %v", tk.Problems)
			}
			if tk.CPUs != c.cpus || tk.MemoryMB != c.memMB || tk.StorageMB != c.storMB {
				t.Errorf("resources = %v cpus, %d MB, %d MB storage; want %v, %d, %d", tk.CPUs, tk.MemoryMB, tk.StorageMB, c.cpus, c.memMB, c.storMB)
			}
			if tk.AgentTimeout != secs(c.agentSec) || tk.VerifierTimeout != secs(c.verifySec) {
				t.Errorf("timeouts = %v / %v; want %vs / %vs", tk.AgentTimeout, tk.VerifierTimeout, c.agentSec, c.verifySec)
			}
			if tk.Image != c.image {
				t.Errorf("image = %q, want %q", tk.Image, c.image)
			}
			if c.dockerfile != (tk.Dockerfile != "") {
				t.Errorf("dockerfile = %q", tk.Dockerfile)
			}
			if want := map[bool]string{true: NetworkPublic, false: NetworkNone}[c.internet]; tk.Network != want {
				t.Errorf("network = %q, want %q", tk.Network, want)
			}
		})
	}
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func TestSampleWarnings(t *testing.T) {
	// version = "2.0" is not a schema Harbor published: read it, say so.
	raw, _ := os.ReadFile("testdata/samples/bash-pam-stack-auth-path-simulator.toml")
	tk := Load(writeTask(t, string(raw), map[string]string{"environment/Dockerfile": "FROM x\n"}))
	if !hasProblem(tk, Warning, 1, "version", "unknown schema version") {
		t.Errorf("want a warning on line 1 about the schema version, got %v", tk.Problems)
	}
	if tk.Workdir != "/app" {
		t.Errorf("workdir = %q", tk.Workdir)
	}
	// [task] name of the registry form wins over the directory name.
	raw, _ = os.ReadFile("testdata/samples/cancel-async-tasks.toml")
	if tk := Load(writeTask(t, string(raw), nil)); tk.Name != "terminal-bench/cancel-async-tasks" || tk.Schema != "1.1" {
		t.Errorf("name, schema = %q, %q", tk.Name, tk.Schema)
	}
}

func hasProblem(tk *Task, sev Severity, line int, field, msg string) bool {
	for _, p := range tk.Problems {
		if p.Severity == sev && (line == 0 || p.Line == line) && p.Field == field && strings.Contains(p.Message, msg) {
			return true
		}
	}
	return false
}

func TestProblems(t *testing.T) {
	cases := []struct {
		name  string
		toml  string
		extra map[string]string
		sev   Severity
		line  int
		field string
		msg   string
	}{
		{"type error located", "version = \"1.0\"\n[environment]\ndocker_image = \"x\"\ncpus = \"two\"\n", nil, Error, 4, "environment.cpus", "cannot decode"},
		{"syntax error located", "version = \"1.0\"\n[environment\ndocker_image = \"x\"\n", nil, Error, 2, "", ""},
		{"unknown key is a warning", "schema_version = \"1.1\"\n[environment]\ndocker_image = \"x\"\nfancy_knob = 3\n", nil, Warning, 4, "environment.fancy_knob", "unknown key"},
		{"bad legacy memory", "[environment]\ndocker_image = \"x\"\nmemory = \"lots\"\n", nil, Error, 3, "environment.memory", "want a number"},
		{"no image", "[environment]\ncpus = 1\n", nil, Error, 0, "environment.docker_image", "no image"},
		{"compose refused", "[environment]\n", map[string]string{"environment/docker-compose.yaml": "services: {}\n"}, Error, 0, "", "docker compose"},
		{"missing tests", "[environment]\ndocker_image = \"x\"\n", map[string]string{"tests/test.sh": ""}, Error, 0, "", "missing"},
		{"negative timeout", "[environment]\ndocker_image = \"x\"\n[agent]\ntimeout_sec = -1.0\n", nil, Error, 4, "agent.timeout_sec", "positive"},
		{"bad network mode", "[environment]\ndocker_image = \"x\"\nnetwork_mode = \"bridge\"\n", nil, Error, 3, "environment.network_mode", "not one of"},
		{"version disagrees", "version = \"1.0\"\nschema_version = \"1.1\"\n[environment]\ndocker_image = \"x\"\n", nil, Warning, 1, "version", "differs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeTask(t, c.toml, c.extra)
			if c.extra != nil {
				for k, v := range c.extra {
					if v == "" {
						os.Remove(filepath.Join(dir, k))
					}
				}
			}
			tk := Load(dir)
			if !hasProblem(tk, c.sev, c.line, c.field, c.msg) {
				t.Fatalf("want %s at line %d field %q containing %q; got %v", c.sev, c.line, c.field, c.msg, tk.Problems)
			}
			if (c.sev == Error) == tk.OK() {
				t.Errorf("OK() = %v with problems %v", tk.OK(), tk.Problems)
			}
		})
	}
}

func TestSchema14(t *testing.T) {
	tk := Load(writeTask(t, `schema_version = "1.4"
[environment]
docker_image = "x"
network_mode = "allowlist"
allowed_hosts = ["pypi.org"]
workdir = "/work"
[environment.healthcheck]
command = "true"
[verifier]
timeout_sec = 30.0
`, nil))
	if !tk.OK() {
		t.Fatal(tk.Problems)
	}
	if tk.AgentTimeout != 0 {
		t.Errorf("schema 1.4 without agent.timeout_sec: timeout = %v, want none", tk.AgentTimeout)
	}
	if tk.VerifierTimeout != 30*time.Second || tk.Network != NetworkAllowlist || tk.AllowedHosts[0] != "pypi.org" {
		t.Errorf("got %v %q %v", tk.VerifierTimeout, tk.Network, tk.AllowedHosts)
	}
	if tk.Config.Environment.Healthcheck == nil || tk.Config.Environment.Healthcheck.Command != "true" {
		t.Errorf("healthcheck = %+v", tk.Config.Environment.Healthcheck)
	}
	// Before 1.4 an absent timeout is Harbor's default.
	if tk := Load(writeTask(t, "[environment]\ndocker_image = \"x\"\n", nil)); tk.AgentTimeout != DefaultTimeout || tk.MemoryMB != DefaultMemoryMB {
		t.Errorf("defaults: %v %d", tk.AgentTimeout, tk.MemoryMB)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"4G": 4096, "10G": 10240, "512M": 512, "2Gi": 2048, "1.5G": 1536, "1024K": 1, "10GB": 10240, "100": 100, " 8g ": 8192} {
		if got, err := parseSizeString(in); err != nil || got != want {
			t.Errorf("parseSizeString(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "lots", "-1G", "1X"} {
		if _, err := parseSizeString(in); err == nil {
			t.Errorf("parseSizeString(%q) succeeded", in)
		}
	}
}

func TestLoadDirKeepsBadTasks(t *testing.T) {
	root := t.TempDir()
	good := writeTask(t, "[environment]\ndocker_image = \"x\"\n", nil)
	bad := writeTask(t, "[environment\n", nil)
	if err := os.Rename(good, filepath.Join(root, "a-good")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bad, filepath.Join(root, "b-bad")); err != nil {
		t.Fatal(err)
	}
	tasks, err := LoadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 2 || tasks[0].Name != "a-good" || !tasks[0].OK() || tasks[1].OK() {
		t.Fatalf("got %d tasks: %+v", len(tasks), tasks)
	}
	if err := tasks[1].Err(); err == nil || !strings.Contains(err.Error(), "task.toml:1") {
		t.Errorf("bad task error = %v, want file and line", err)
	}
}
