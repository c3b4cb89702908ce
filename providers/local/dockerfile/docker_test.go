package dockerfile

import (
	"runtime"
	"strings"
	"testing"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// disagreement is a Dockerfile the hand-written parser of 5553f78 read
// otherwise than Docker (BuildKit) does; old says how, and want (or
// wantErr) pins Docker's reading, which berth now has.
type disagreement struct {
	name    string
	src     string
	args    map[string]string
	old     string
	want    []string
	wantErr string
	class   errdefs.Class
}

var disagreements = []disagreement{
	{name: "a continuation joins without a space",
		src: "FROM a\nRUN echo foo\\\nbar\n", old: `echo foo bar`,
		want: []string{`2 RUN ["/bin/sh" "-c" "echo foobar"]`}},
	{name: "quotes and backslashes of a legacy ENV value are the lexer's",
		src: "FROM a\nENV GREETING hello \"quoted\" world\\!\n", old: `hello "quoted" world\!`,
		want: []string{`2 ENV ["GREETING" "hello quoted world!"]`}},
	{name: "single quotes keep $ literal; a backslash escapes a space",
		src: "FROM a\nENV A=c\\ d B='$HOME' C=\"$HOME\"\n", old: `error: ENV "d" is not NAME=value`,
		want: []string{`2 ENV ["A" "c d" "B" "$HOME" "C" "/root"]`}},
	{name: "${V:+x} is substituted",
		src: "FROM a\nARG V=set\nENV W=${V:+yes} X=${NOPE:+yes}\n", old: `W= X= (the name "V:+yes" looked up)`,
		want: []string{`2 ARG ["V" "set"]`, `3 ENV ["W" "yes" "X" ""]`}},
	{name: "${V:?msg} fails the build",
		src: "FROM a\nENV X=${NOPE:?required}\n", old: `X=`,
		wantErr: `Dockerfile:2: failed to process "${NOPE:?required}": NOPE: required`, class: errdefs.InvalidArgument},
	{name: "$1 is a positional parameter, unset",
		src: "FROM a\nENV X=$1\n", old: `X=$1`,
		want: []string{`2 ENV ["X" ""]`}},
	{name: "an ARG without a value or build argument is unset, not empty",
		src: "FROM a\nARG X\nENV Y=${X-unset} Z=${X:-empty}\n", old: `ARG X=""; Y=`,
		want: []string{`2 ARG []`, `3 ENV ["Y" "unset" "Z" "empty"]`}},
	{name: "an ARG before FROM is FROM's only",
		src: "ARG V=1\nFROM a:$V\nENV W=${V:-unset}\n", old: `W=1`,
		want: []string{`3 ENV ["W" "unset"]`}},
	{name: "the platform's build arguments are defined",
		src: "FROM a\nARG TARGETARCH\nENV ARCH=$TARGETARCH\n", old: `ARCH=`,
		want: []string{`2 ARG ["TARGETARCH" "` + runtime.GOARCH + `"]`, `3 ENV ["ARCH" "` + runtime.GOARCH + `"]`}},
	{name: "COPY --chown and --chmod are substituted",
		src: "FROM a\nARG UID=1000\nCOPY --chown=$UID:$UID --chmod=${MODE:-644} x /x\n", old: `--chown=$UID:$UID --chmod=${MODE:-644}`,
		want: []string{`2 ARG ["UID" "1000"]`, `3 COPY --chmod=644 --chown=1000:1000 ["x" "/x"]`}},
	{name: "SHELL changes what runs the shell form",
		src: "FROM a\nSHELL [\"/bin/bash\", \"-o\", \"pipefail\", \"-c\"]\nRUN false | true\n", old: `SHELL dropped: /bin/sh -c`,
		want: []string{`3 RUN ["/bin/bash" "-o" "pipefail" "-c" "false | true"]`}},
	{name: "heredocs are one instruction",
		src: "FROM a\nRUN <<EOF\nset -e\nEOF\n", old: `error: SET is not supported`,
		want: []string{`2 RUN ["/bin/sh" "-c" "set -e\n"]`}},
	{name: "the escape directive",
		src: "# escape=`\nFROM a\nRUN echo `\n  b\n", old: "error: B is not supported (and a literal backtick)",
		want: []string{`3 RUN ["/bin/sh" "-c" "echo   b"]`}},
	{name: "absolute and climbing sources are read from the context's root",
		src: "FROM a\nCOPY ../x /etc/passwd /y/\n", old: `error: outside the build context`,
		want: []string{`2 COPY ["../x" "/etc/passwd" "/y/"]`}},
	{name: "WORKDIR and USER may substitute to empty (no change; root)",
		src: "FROM a\nWORKDIR $NOPE\nUSER $NOPE\n", old: `error: WORKDIR needs a value`,
		want: []string{`2 WORKDIR [""]`, `3 USER [""]`}},
	{name: "a legacy ENV needs a value",
		src: "FROM a\nENV A\n", old: `A=""`,
		wantErr: "Dockerfile:2: ENV must have two arguments", class: errdefs.InvalidArgument},
	{name: "ignored instructions are still checked",
		src: "FROM a\nLABEL\n", old: `accepted`,
		wantErr: "Dockerfile:2: LABEL requires at least one argument", class: errdefs.InvalidArgument},
	{name: "a line is at most 64 KiB",
		src: "FROM a\nRUN " + strings.Repeat("x", 1<<16) + "\n", old: `accepted up to 1 MiB`,
		wantErr: "Dockerfile:2: dockerfile line greater than max allowed size of 65535", class: errdefs.InvalidArgument},
}

// TestDockerDisagreements pins, for each way the hand-written parser
// disagreed with Docker, Docker's reading.
func TestDockerDisagreements(t *testing.T) {
	for _, c := range disagreements {
		t.Run(c.name, func(t *testing.T) {
			f, err := ParseWithEnv(strings.NewReader(c.src), c.args, []string{"HOME=/root"})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || errdefs.ClassOf(err) != c.class {
					t.Fatalf("err %v, want %v containing %q (the old parser: %s)", err, c.class, c.wantErr, c.old)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := renderAll(f)
			for i := range max(len(got), len(c.want)) {
				if g, w := at(got, i), at(c.want, i); g != w {
					t.Errorf("instruction %d:\n got %s\nwant %s (the old parser: %s)", i, g, w, c.old)
				}
			}
		})
	}
}
