package daytona

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/berth-sh/berth/sandbox/driver"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// The exec wrapper. A toolbox session runs a shell command line and keeps
// its output as marked text lines, which lose NUL bytes and a missing final
// newline. The wrapper therefore runs the program in the background with
// stdout and stderr on FIFOs, each drained by an encoder that turns every
// chunk it can read at once (dd count=1 returns what a read returns) into
// base64 lines: output still streams, and decodes to the exact bytes. The
// program's PID goes to a file for Signal; the wrapper's own status is the
// program's, signals included (128+n). Wrapper messages are text lines
// starting with '!', which base64 never does.
//
// With stdin, a decoder turns the session's input lines into the program's
// stdin: "d<base64>" is data, "e" is end of input, which closes the FIFO the
// program reads. Everything is POSIX sh plus dd, base64, mkfifo: coreutils
// and busybox both have them.
const (
	wrapperHead = `__bd=%s
if mkdir -p "$__bd" && mkfifo "$__bd/o" "$__bd/e"%s; then
__be() { while __bc=$(dd bs=49152 count=1 2>/dev/null | base64); [ -n "$__bc" ]; do printf '%%s\n' "$__bc"; done; }
__be <"$__bd/o" & __bo=$!
__be <"$__bd/e" >&2 & __bx=$!
`
	wrapperStdin = `__bi() { while IFS= read -r __bl; do case $__bl in e) break ;; d*) printf '%s' "${__bl#d}" | base64 -d || break ;; esac; done; }
{ __bi <&5 >"$__bd/i" & } 5<&0
__bn=$!
`
	wrapperTail = `echo "$__bp" >"$__bd/pid"
wait "$__bp"; __bs=$?
%swait "$__bo" "$__bx"
rm -rf "$__bd"
(exit "$__bs")
else
echo '!berth: cannot prepare the command directory' >&2
(exit 126)
fi
`
)

// execDir is where the wrapper of command id keeps its FIFOs and PID file.
func execDir(id string) string { return "/tmp/.berth-exec-" + id }

// shellName matches names the shell can export.
var shellName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// wrapperScript builds the command line for cmd, run by execution id.
func wrapperScript(id string, cmd driver.Command) (string, error) {
	for _, a := range cmd.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return "", errdefs.Errorf(errdefs.InvalidArgument, "daytona: an argument holds a NUL byte")
		}
	}
	if strings.IndexByte(cmd.Dir, 0) >= 0 {
		return "", errdefs.Errorf(errdefs.InvalidArgument, "daytona: the working directory holds a NUL byte")
	}
	var prog strings.Builder
	if cmd.Dir != "" {
		dir := cmd.Dir
		if strings.HasPrefix(dir, "-") {
			dir = "./" + dir
		}
		fmt.Fprintf(&prog, "cd %s || exit 1; ", quote(dir))
	} else {
		fmt.Fprintf(&prog, `[ -z "${%s:-}" ] || cd "$%s" || exit 1; `, WorkDirVar, WorkDirVar)
	}
	var odd []string // names the shell cannot export go through env(1)
	for _, k := range slices.Sorted(maps.Keys(cmd.Env)) {
		v := cmd.Env[k]
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return "", errdefs.Errorf(errdefs.InvalidArgument, "daytona: environment variable %q is invalid (empty name, '=' or a NUL byte)", k)
		}
		if shellName.MatchString(k) {
			fmt.Fprintf(&prog, "%s=%s; export %s; ", k, quote(v), k)
		} else {
			odd = append(odd, quote(k+"="+v))
		}
	}
	prog.WriteString("exec ")
	if len(odd) > 0 {
		prog.WriteString("env -- " + strings.Join(odd, " ") + " ")
	}
	for i, a := range cmd.Args {
		if i > 0 {
			prog.WriteByte(' ')
		}
		prog.WriteString(quote(a))
	}

	dir := quote(execDir(id))
	var b strings.Builder
	stdin := cmd.Stdin != nil
	if stdin {
		fmt.Fprintf(&b, wrapperHead, dir, ` "$__bd/i"`)
		b.WriteString(wrapperStdin)
		fmt.Fprintf(&b, "( %s ) <\"$__bd/i\" >\"$__bd/o\" 2>\"$__bd/e\" & __bp=$!\n", prog.String())
		fmt.Fprintf(&b, wrapperTail, `kill "$__bn" 2>/dev/null; wait "$__bn" 2>/dev/null
`)
	} else {
		fmt.Fprintf(&b, wrapperHead, dir, "")
		fmt.Fprintf(&b, "( %s ) </dev/null >\"$__bd/o\" 2>\"$__bd/e\" & __bp=$!\n", prog.String())
		fmt.Fprintf(&b, wrapperTail, "")
	}
	return b.String(), nil
}

// signalScript sends sig to the program of execution id, waiting briefly
// for its PID file (the wrapper may not have written it yet). It exits 3
// when there is no such process.
func signalScript(id string, sig driver.Signal) (string, error) {
	name, ok := strings.CutPrefix(string(sig), "SIG")
	if !ok || name == "" || strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" {
		return "", errdefs.Errorf(errdefs.InvalidArgument, "daytona: signal %q is not a signal name like SIGTERM", sig)
	}
	f := quote(execDir(id) + "/pid")
	return fmt.Sprintf(`__f=%s; __n=0
while [ ! -s "$__f" ]; do __n=$((__n+1)); [ "$__n" -gt 100 ] && exit 3; sleep 0.05 2>/dev/null || sleep 1; done
kill -s %s "$(cat "$__f")" 2>/dev/null || exit 3
`, f, name), nil
}

// quote makes s one shell word.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
