package modal_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth/builtin"
	"github.com/berth-sh/berth/registry"
	"github.com/berth-sh/berth/smoke"
)

// writeTask writes a Harbor task on image whose oracle writes a word and
// whose verifier checks it, through absolute paths.
func writeTask(t *testing.T, image string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"task.toml": `schema_version = "1.1"
[task]
name = "berth/modal-golden"
[agent]
timeout_sec = 60.0
[verifier]
timeout_sec = 60.0
[environment]
docker_image = "` + image + `"
cpus = 1
memory_mb = 512
`,
		"instruction.md":    "Write the word berth to /tmp/golden/answer.txt.\n",
		"solution/solve.sh": "#!/bin/sh\nset -e\nmkdir -p /tmp/golden\necho berth > /tmp/golden/answer.txt\n",
		"tests/test.sh": `#!/bin/sh
if [ "$(cat /tmp/golden/answer.txt)" = berth ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
`,
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The golden episode of `berth smoke --connector harbor --backend modal`
// runs end to end against the in-process server, reached the way the CLI
// reaches Modal: the registry resolves the token pair from the environment
// and MODAL_SERVER_URL points the SDK at the server. The sandbox is gone
// afterwards.
func TestGoldenEpisode(t *testing.T) {
	srv := serveChroot(t)
	env := registry.MapEnviron(map[string]string{
		"MODAL_TOKEN_ID":     srv.TokenID(),
		"MODAL_TOKEN_SECRET": srv.TokenSecret(),
		"MODAL_SERVER_URL":   srv.URL(),
	}, t.TempDir())
	rep, err := smoke.Run(t.Context(), smoke.Options{
		Backend: "modal", TaskDir: writeTask(t, testImage), Registry: builtin.Registry(), Env: env,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.Print(&out)
	if !rep.Pass || rep.Reward != 1 || rep.ExitStatus != smoke.Submitted {
		t.Fatalf("golden episode on modal:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "backend modal") || !strings.Contains(out.String(), rep.SandboxID) {
		t.Errorf("report:\n%s", out.String())
	}
	st, ok := srv.Sandbox(rep.SandboxID)
	if !ok || st.Result == nil {
		t.Errorf("sandbox %s still running after teardown (known: %v)", rep.SandboxID, ok)
	}
	if st.Definition.GetResources().GetMilliCpu() != 1000 || st.Definition.GetResources().GetMemoryMb() != 512 {
		t.Errorf("task resources reached Modal as %v", st.Definition.GetResources())
	}
	t.Logf("\n%s", out.String())
}
