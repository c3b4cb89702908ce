package llamatest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/internal/testing/hfref"
)

// generator names this file's way of writing a model: change it when the
// bytes for the same parameters change, so that caches hold no stale model.
const generator = "qwen3-channel-v1"

// Model returns the path of the model for p with Qwen3's tokenizer and
// chat template (the npm reference package; the test skips without it),
// generating it on first use into the cache directory (CacheDir) under a
// name made of the parameters, the generator and the tokenizer files'
// hashes, so that reruns load it in place.
func Model(t testing.TB, p Params) string {
	t.Helper()
	dir := hfref.RequireQwen3(t)
	p = p.withDefaults()
	key, err := modelKey(dir, p)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(CacheDir(t), "qwen3-tiny-"+key+".gguf")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	var b bytes.Buffer
	if err := writeQwen3(&b, dir, p); err != nil {
		t.Fatal(err)
	}
	// Written whole and renamed into place: test processes of other
	// packages may generate the same file at the same time.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Write(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// CacheDir is where generated models are kept: berth-test/llama under
// the user's cache directory (os.UserCacheDir), or a directory of the
// test's own when there is none.
func CacheDir(t testing.TB) string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "berth-test", "llama")
	}
	return t.TempDir()
}

func modelKey(dir string, p Params) (string, error) {
	h := sha256.New()
	pj, _ := json.Marshal(p)
	fmt.Fprintf(h, "%s\n%s\n", generator, pj)
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
