package apikeys

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

func TestLoadOrCreateGeneratesOnceAndPrintsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conf", "keys")
	var out bytes.Buffer
	kr, err := LoadOrCreate(path, &out)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(data))
	if !strings.HasPrefix(key, Prefix) || len(key) != len(Prefix)+40 {
		t.Fatalf("generated key %q", key)
	}
	if !strings.Contains(out.String(), key) {
		t.Fatal("the new key was not shown")
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		fi, _ := os.Stat(p)
		if fi.Mode().Perm() != want {
			t.Fatalf("%s has mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
	if id, ok := kr.Check(key); !ok || id != ID(key) {
		t.Fatalf("generated key refused: %q %v", id, ok)
	}
	// A second start loads the same key and prints nothing.
	out.Reset()
	kr2, err := LoadOrCreate(path, &out)
	if err != nil || out.Len() != 0 {
		t.Fatalf("second start: %v, printed %q", err, out.String())
	}
	if _, ok := kr2.Check(key); !ok {
		t.Fatal("key not loaded on the second start")
	}
	if Generate() == key {
		t.Fatal("two generated keys are equal")
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "# team keys\n\nalpha_key_0123456789\n  beta_key_0123456789abc  \n", 0o600)
	kr, err := Load(good)
	if err != nil || kr.Len() != 2 {
		t.Fatalf("load: %v", err)
	}
	for _, k := range []string{"alpha_key_0123456789", "beta_key_0123456789abc"} {
		if _, ok := kr.Check(k); !ok {
			t.Fatalf("%s refused", k)
		}
	}
	for _, k := range []string{"", "alpha_key_012345678", "alpha_key_01234567890", "# team keys", "ALPHA_KEY_0123456789"} {
		if _, ok := kr.Check(k); ok {
			t.Fatalf("%q accepted", k)
		}
	}
	for name, tc := range map[string]struct {
		body string
		mode os.FileMode
		want string
	}{
		"world-readable": {"alpha_key_0123456789\n", 0o644, "chmod 600"},
		"short key":      {"short\n", 0o600, "line 1"},
		"empty":          {"# nothing\n", 0o600, "no key"},
		"spaces in key":  {"alpha key 0123456789\n", 0o600, "spaces"},
	} {
		_, err := Load(write(name, tc.body, tc.mode))
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: %v, want InvalidArgument mentioning %q", name, err, tc.want)
		}
		if strings.Contains(err.Error(), "alpha") || strings.Contains(err.Error(), "short\n") {
			t.Fatalf("%s: the error echoes the file's content: %v", name, err)
		}
	}
	if _, err := Load(filepath.Join(dir, "missing")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestIDRevealsNothingUsable: an ID holds no piece of its key. The key is
// made of hex digits, so that a piece of it could show in the hex ID at
// all (the check on 6f9918d used a key with '_' in the piece it looked
// for, which no ID can hold: it could not fail). It is the whole hash,
// stable, and differs for a key one byte longer.
func TestIDRevealsNothingUsable(t *testing.T) {
	k := "0123456789abcdef0123456789abcdef"
	id := ID(k)
	for i := 0; i+8 <= len(k); i++ {
		if strings.Contains(id, k[i:i+8]) {
			t.Fatalf("ID %q holds %q of the key", id, k[i:i+8])
		}
	}
	if len(id) != len("key-")+64 || id != ID(k) || id == ID(k+"0") {
		t.Fatalf("ID %q", id)
	}
}

// A derived value depends on the key and the message, is the same from
// every keyring that holds the key, and needs the key.
func TestDerive(t *testing.T) {
	a, _ := New("key_aaaaaaaaaaaaaaaa", "key_bbbbbbbbbbbbbbbb")
	b, _ := New("key_bbbbbbbbbbbbbbbb")
	ida, idb := ID("key_aaaaaaaaaaaaaaaa"), ID("key_bbbbbbbbbbbbbbbb")
	x, ok1 := a.Derive(idb, "m1")
	y, ok2 := b.Derive(idb, "m1")
	if !ok1 || !ok2 || x != y || len(x) != 64 {
		t.Fatalf("the same key and message: %q %v, %q %v", x, ok1, y, ok2)
	}
	if z, _ := a.Derive(idb, "m2"); z == x {
		t.Errorf("another message derived the same value")
	}
	if z, _ := a.Derive(ida, "m1"); z == x {
		t.Errorf("another key derived the same value")
	}
	if z, ok := b.Derive(ida, "m1"); ok || z != "" {
		t.Errorf("a keyring without the key derived %q", z)
	}
	if strings.Contains(x, "key_bbbb") {
		t.Errorf("the derived value shows the key")
	}
}
