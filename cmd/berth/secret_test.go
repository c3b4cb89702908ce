package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth/registry"
)

// The secrets of this test: each is distinctive, so finding any part of one
// in an output is a leak.
var testSecrets = []string{
	"e2bFILE-7f3a9c1d-SECRET",
	"e2bENV-2b8e4f60-SECRET",
	"e2bFLAG-91c0d7aa-SECRET",
	"dtnFILE-4c1e8b22-SECRET",
	"dtnENV-0a9f3e57-SECRET",
	"ak-MODALFILE-5d2c7e19",
	"as-MODALFILE-e83b1f04",
	"ak-MODALENV-6f0a2d83",
	"as-MODALENV-b47c9e12",
	"urlPASS-3e7d1a90-SECRET",
	"as-BROKENTOML-c5d8e2a1",
}

// TestNoSecretInAnyOutput runs every verb, in every mode, with secrets in
// the key files, in the environment and embedded in an address, and
// requires that no secret appears in stdout, stderr, or any request the
// doctor's probes send.
func TestNoSecretInAnyOutput(t *testing.T) {
	var (
		mu       sync.Mutex
		requests bytes.Buffer
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		_ = r.Write(&requests) // method, URL, headers
		requests.Write(body)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()

	home := t.TempDir()
	write := func(rel, data string) string {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write(".config/e2b/api_key", testSecrets[0]+"\n")
	flagKey := write("keys/agentenv.key", testSecrets[2]+"\n")
	write(".config/daytona/api_key", testSecrets[3]+"\n")
	write(".modal.toml", "[default]\ntoken_id = \""+testSecrets[5]+"\"\ntoken_secret = \""+testSecrets[6]+"\"\n")
	// A config whose syntax error sits next to the secret: a parser's
	// message quoting the line would leak it.
	brokenTOML := write("broken.toml", "[default]\ntoken_id = \"ak-x\"\ntoken_secret = \""+testSecrets[10]+"\n")

	base := map[string]string{
		"PATH":               os.Getenv("PATH"),
		"E2B_API_KEY":        testSecrets[1],
		"DAYTONA_API_KEY":    testSecrets[4],
		"MODAL_TOKEN_ID":     testSecrets[7],
		"MODAL_TOKEN_SECRET": testSecrets[8],
		"E2B_API_URL":        srv.URL,
		"DAYTONA_API_URL":    srv.URL,
	}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	envs := map[string]map[string]string{
		"files and env": base,
		"url with credential": with(
			"E2B_API_URL", "https://admin:"+testSecrets[9]+"@127.0.0.1:9",
			"E2B_SANDBOX_URL", "http://u:"+testSecrets[9]+"@127.0.0.1:9",
			"DAYTONA_API_URL", "https://admin:"+testSecrets[9]+"@127.0.0.1:9",
			"MODAL_ENVIRONMENT", "x@"+testSecrets[9]),
		"broken modal config":   with("MODAL_CONFIG_PATH", brokenTOML, "MODAL_TOKEN_ID", "", "MODAL_TOKEN_SECRET", ""),
		"explicit missing file": with("E2B_API_KEY_FILE", filepath.Join(home, "nope"), "DAYTONA_API_KEY_FILE", filepath.Join(home, "nope")),
	}

	var cmds [][]string
	cmds = append(cmds,
		[]string{"providers"}, []string{"providers", "--json"},
		[]string{"doctor"}, []string{"version"}, []string{"--help"},
		[]string{"env", "--help"}, []string{"doctor", "--help"}, []string{"providers", "--help"},
		[]string{"env", "--backend", "e2b", "--key-file", "/nonexistent"},
		[]string{"env", "--backend", "agentenv", "--key-file", flagKey},
		[]string{"env", "--backend", "modal", "--key-file", brokenTOML},
	)
	for _, name := range []string{"local", "e2b", "agentenv", "daytona", "modal"} {
		cmds = append(cmds,
			[]string{"env", "--backend", name},
			[]string{"env", "--backend", name, "--format", "json"},
			[]string{"doctor", "--backend", name},
		)
	}

	var all bytes.Buffer
	runs := 0
	for envName, vars := range envs {
		env := registry.MapEnviron(vars, home)
		for _, args := range cmds {
			var stdout, stderr bytes.Buffer
			code := run(args, strings.NewReader(""), &stdout, &stderr, env)
			runs++
			for _, s := range testSecrets {
				for _, out := range []struct {
					name string
					b    []byte
				}{{"stdout", stdout.Bytes()}, {"stderr", stderr.Bytes()}} {
					if leaked(out.b, s) {
						t.Errorf("%s: berth %s (exit %d): %s holds secret %q:\n%s", envName, strings.Join(args, " "), code, out.name, s, out.b)
					}
				}
			}
			all.Write(stdout.Bytes())
			all.Write(stderr.Bytes())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range testSecrets {
		if leaked(requests.Bytes(), s) {
			t.Errorf("a probe request carried secret %q", s)
		}
	}

	// The runs did what they claim: files were found and forwarded by path,
	// probes reached the server, the refusals happened.
	for _, want := range []string{
		"E2B_API_KEY_FILE='" + filepath.Join(home, ".config/e2b/api_key") + "'",
		"E2B_API_KEY_FILE='" + flagKey + "'",
		`"MODAL_CONFIG_PATH":"` + filepath.Join(home, ".modal.toml") + `"`,
		"credential supply: file",
		"reachable (HTTP 401)",
		"E2B_API_URL contains '@'",
		"E2B_API_KEY_FILE=/nonexistent is missing or empty",
		"no API key",
	} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("no output holds %q; the test did not exercise what it claims", want)
		}
	}
	if !strings.Contains(requests.String(), "GET /sandboxes") {
		t.Errorf("no probe reached the test server; requests:\n%s", requests.String())
	}
	t.Logf("%d runs, %d bytes of output, %d bytes of probe requests, no secret found", runs, all.Len(), requests.Len())
}

// leaked reports whether b holds s, or any 8-byte piece of its distinctive
// middle (a truncated or partly masked secret is still a leak).
func leaked(b []byte, s string) bool {
	if bytes.Contains(b, []byte(s)) {
		return true
	}
	for i := 0; i+8 <= len(s); i++ {
		piece := s[i : i+8]
		if strings.Contains(piece, "SECRET") || strings.HasPrefix(piece, "ak-") || strings.HasPrefix(piece, "as-") {
			continue // shared prefixes and suffixes are not distinctive
		}
		if bytes.Contains(b, []byte(piece)) {
			return true
		}
	}
	return false
}
