package local_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth/sandbox"
)

// What Docker (BuildKit) does beyond the old hand-written parser, built
// for real: COPY heredocs (substituted unless the delimiter is quoted,
// named after the heredoc in a directory), a RUN heredoc run by the shell,
// one starting with "#!" run as its own file in /dev/pipes for that step
// only, SHELL, and sources read from the context's root however they climb.
const heredocDockerfile = `FROM berth.local/busybox:latest
ARG WHO=builder
ENV GREETING=hello
COPY <<EOF /etc/greeting
$GREETING from ${WHO}
EOF
COPY --chmod=600 <<'EOF' <<two.txt /opt/inline/
literal $GREETING
EOF
two
two.txt
COPY ../top.txt /climbed/
RUN <<EOF
set -e
echo "plain as $(id -u)" > /plain.txt
EOF
RUN <<SCRIPT
#!/bin/sh
echo "$0" > /shebang.txt
ls /dev/pipes >> /shebang.txt
SCRIPT
RUN ls /dev/pipes | wc -l > /pipes-after.txt
SHELL ["/bin/sh", "-c", "echo \"$0:$1\" > /shell.txt", "via-shell"]
RUN whatever
`

func TestBuildDockerfileHeredocs(t *testing.T) {
	p, logs := buildProvider(t)
	ctx := testCtx(t)
	st := buildStore(t)
	dir := writeContext(t, map[string]string{"Dockerfile": heredocDockerfile, "top.txt": "top\n"})
	spec := sandbox.Spec{Build: &sandbox.Build{ContextDir: dir}}
	if err := p.PrepareImage(ctx, spec); err != nil {
		t.Fatalf("build: %v\nlogs:\n%s", err, logs)
	}
	sb := createBuilt(t, p, spec)
	for _, c := range []struct{ script, want string }{
		{"cat /etc/greeting", "hello from builder"},
		{"stat -c '%a' /opt/inline/EOF /opt/inline/two.txt; cat /opt/inline/EOF /opt/inline/two.txt", "600\n600\nliteral $GREETING\ntwo"},
		{"cat /climbed/top.txt", "top"},
		{"cat /plain.txt", "plain as 0"},
		{"cat /shebang.txt", "/dev/pipes/SCRIPT\nSCRIPT"},
		{"cat /pipes-after.txt", "0"},
		{"cat /shell.txt", "via-shell:whatever"},
	} {
		if got := sh(t, sb, c.script); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.script, got, c.want)
		}
	}
	imgs, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range imgs {
		if !strings.Contains(img.Ref, "/ctx:") {
			continue
		}
		top := img.Layers[len(img.Layers)-1]
		if _, err := os.Lstat(filepath.Join(top, "dev/pipes")); err == nil {
			t.Errorf("the built layer holds the heredoc script's dev/pipes")
		}
	}
}
