package localagent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A config written after the pipe was handed over (the pool's way) reads
// back whole, and apply puts its Env over the agent's own and makes Dir.
func TestConfigEnvAndDir(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "work", "dir")
	b, err := EncodeConfig(Config{Token: "t", Dir: dir, Env: map[string]string{"A": "2", "NEW": "x=y"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	w.Close()
	c, err := ReadConfig(dupFD(t, r)) // ReadConfig closes its fd; r must not close it again
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.apply([]string{"A=1", "B=2", "PATH=/bin"})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(env)
	if want := []string{"A=2", "B=2", "NEW=x=y", "PATH=/bin"}; !slices.Equal(env, want) {
		t.Errorf("env = %q, want %q", env, want)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("Dir not made: %v", err)
	}
	if _, err := EncodeConfig(Config{Env: map[string]string{"BIG": string(make([]byte, maxConfig))}}); err == nil {
		t.Errorf("a config over %d bytes was encoded", maxConfig)
	}
}
