package localagent

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Fds and paths the provider and the agent agree on.
const (
	// ListenFD is the inherited listening socket.
	ListenFD = 3
	// ConfigFD is the inherited pipe holding Config.
	ConfigFD = 4
	// BinaryPath is where the berth binary is mounted read-only inside.
	BinaryPath = "/.berth/berth"
	// RunDirPath is where, under a runtime that cannot pass fds (gVisor's
	// runsc), a host directory of the sandbox's own is mounted: the agent
	// listens on RunSocket in it and reads its Config from RunConfig,
	// which it removes before it serves.
	RunDirPath = "/.berth/run"
	RunSocket  = "agent.sock"
	RunConfig  = "config.json"
)

// maxConfig bounds what the agent reads from the config pipe.
const maxConfig = 64 << 10

// Config is what the provider tells the agent at start.
type Config struct {
	// Token must arrive as X-Access-Token on every envd call. Secret.
	Token string `json:"token"`
	// Deadline is when the agent exits, ending the sandbox; zero is never.
	Deadline time.Time `json:"deadline,omitzero"`
	// User runs commands that name no user; "" is the agent's own user.
	User string `json:"user,omitempty"`
	// Dir is the working directory of commands that name none, when the
	// user has no home that applies; "" is "/". The agent makes it when
	// missing, as the runtime does for an init's cwd.
	Dir string `json:"dir,omitempty"`
	// Env is set over the agent's own environment for the commands it
	// starts: a sandbox started ahead of its Spec (the provider's pool)
	// gets the Spec's environment here.
	Env map[string]string `json:"env,omitempty"`
}

// EncodeConfig is what WriteConfig puts in the pipe, for a provider that
// holds the pipe's write end open until it knows the Config.
func EncodeConfig(c Config) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfig {
		return nil, fmt.Errorf("agent config is %d bytes, over %d", len(b), maxConfig)
	}
	return b, nil
}

// apply makes c.Dir if missing and returns env with c.Env over it.
func (c Config) apply(env []string) ([]string, error) {
	if c.Dir != "" {
		if err := os.MkdirAll(c.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("agent: working directory: %w", err)
		}
	}
	if len(c.Env) == 0 {
		return env, nil
	}
	out := make([]string, 0, len(env)+len(c.Env))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !hasKey(c.Env, k) {
			out = append(out, kv)
		}
	}
	for k, v := range c.Env {
		out = append(out, k+"="+v)
	}
	return out, nil
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// WriteConfig returns the read end of a pipe that holds c and then EOF,
// to pass as fd ConfigFD. The caller closes it after the container started.
func WriteConfig(c Config) (*os.File, error) {
	b, err := EncodeConfig(c)
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// A pipe buffers 64 KiB, so this write does not wait for a reader.
	_, err = w.Write(b)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("agent config pipe: %w", err)
	}
	return r, nil
}

// ReadConfig reads Config from the inherited fd and closes it.
func ReadConfig(fd int) (Config, error) {
	f := os.NewFile(uintptr(fd), "agent-config")
	if f == nil {
		return Config{}, fmt.Errorf("agent: config fd %d is not open", fd)
	}
	defer f.Close()
	return readConfig(f)
}

// ReadConfigFile reads Config from the file at p and removes it: the token
// in it must not stay where the sandbox's processes, which start after
// this, can read it.
func ReadConfigFile(p string) (Config, error) {
	f, err := os.Open(p)
	if err != nil {
		return Config{}, fmt.Errorf("agent: config: %w", err)
	}
	defer f.Close()
	if err := os.Remove(p); err != nil {
		return Config{}, fmt.Errorf("agent: config: %w", err)
	}
	return readConfig(f)
}

// WriteConfigFile writes c to the file at p, root's alone.
func WriteConfigFile(p string, c Config) error {
	b, err := EncodeConfig(c)
	if err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o600)
}

func readConfig(r io.Reader) (Config, error) {
	var c Config
	b, err := io.ReadAll(io.LimitReader(r, maxConfig+1))
	if err != nil {
		return c, fmt.Errorf("agent: read config: %w", err)
	}
	if len(b) > maxConfig {
		return c, fmt.Errorf("agent: config over %d bytes", maxConfig)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("agent: config: %w", err)
	}
	return c, nil
}
