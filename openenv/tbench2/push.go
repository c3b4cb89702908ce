package tbench2

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/berth-sh/berth/sandbox/hosttar"
)

// PushChunk is the base64 bytes one push command carries: Miles'
// scan_golden size, far below any frame limit.
const PushChunk = 64 << 10

// PushCommands are exec commands that stage the host directory dir at dest
// in the sandbox through exec actions alone, as Miles' scan_golden stages a
// task's solution: a gzipped tar, in base64 (shell-safe, so it rides an
// unquoted printf) appended chunk by chunk to a temporary file, then
// decoded and unpacked. The sandbox needs sh, base64, tar and gzip.
func PushCommands(ctx context.Context, dir, dest string) ([]string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := hosttar.Write(ctx, zw, root, "."); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	b64 := base64.StdEncoding.EncodeToString(buf.Bytes())
	tmp := "/tmp/berth-push.b64"
	cmds := []string{"rm -f " + tmp}
	for i := 0; i < len(b64); i += PushChunk {
		cmds = append(cmds, fmt.Sprintf("printf %%s %s >> %s", b64[i:min(i+PushChunk, len(b64))], tmp))
	}
	q := ShellQuote(dest)
	cmds = append(cmds, fmt.Sprintf("mkdir -p %s && base64 -d %s | tar xzf - -C %s && rm -f %s", q, tmp, q, tmp))
	return cmds, nil
}

// ShellQuote quotes s for sh.
func ShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// SolveCommand runs a staged solution the way Harbor's oracle does
// (executable, its output in logFile, DEBIAN_FRONTEND=noninteractive and the
// task's [solution].env) and prints SOLVE_EXIT=<code> last.
func SolveCommand(script, logFile string, env map[string]string) (string, error) {
	vars := map[string]string{"DEBIAN_FRONTEND": "noninteractive"}
	maps.Copy(vars, env)
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		if !envName.MatchString(k) {
			return "", fmt.Errorf("solution env: %q is not a variable name", k)
		}
		fmt.Fprintf(&b, "%s=%s ", k, ShellQuote(vars[k]))
	}
	s, l := ShellQuote(script), ShellQuote(logFile)
	return fmt.Sprintf("chmod +x %s && %s%s > %s 2>&1; echo SOLVE_EXIT=$?", s, b.String(), s, l), nil
}
