package dockerfile

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

func TestParseSubset(t *testing.T) {
	src := `# a comment
ARG BASE=debian:bookworm-slim
FROM ${BASE}
LABEL maintainer="someone"
ARG VERSION=1.2
ENV APP_HOME=/app PATH="/app/bin:$PATH" V=${VERSION}
ENV LEGACY value with spaces
WORKDIR $APP_HOME
RUN apt-get update && \
    apt-get install -y curl
RUN ["/bin/sh", "-c", "echo exec form"]
COPY --chown=1000:1000 src/ ./src/
ADD data.tar files/
USER nobody
CMD ["bash"]
`
	f, err := Parse(strings.NewReader(src), map[string]string{"VERSION": "9.9"})
	if err != nil {
		t.Fatal(err)
	}
	if f.Base != "debian:bookworm-slim" {
		t.Errorf("base = %q", f.Base)
	}
	var got []string
	for _, in := range f.Instructions {
		got = append(got, in.Cmd)
	}
	want := []string{"ARG", "ENV", "ENV", "WORKDIR", "RUN", "RUN", "COPY", "ADD", "USER"}
	if !slices.Equal(got, want) {
		t.Fatalf("instructions = %v, want %v", got, want)
	}
	in := f.Instructions
	if !slices.Equal(in[1].Args, []string{"APP_HOME", "/app", "PATH", "/app/bin:", "V", "9.9"}) {
		t.Errorf("ENV args = %q (build arg must override the default; unknown $PATH is empty)", in[1].Args)
	}
	if !slices.Equal(in[2].Args, []string{"LEGACY", "value with spaces"}) {
		t.Errorf("legacy ENV = %q", in[2].Args)
	}
	if in[3].Args[0] != "/app" {
		t.Errorf("WORKDIR = %q", in[3].Args)
	}
	if in[4].Line != 9 || in[4].Args[2] != "apt-get update &&     apt-get install -y curl" {
		t.Errorf("RUN line %d args %q", in[4].Line, in[4].Args)
	}
	if !slices.Equal(in[5].Args, []string{"/bin/sh", "-c", "echo exec form"}) {
		t.Errorf("exec form = %q", in[5].Args)
	}
	if in[6].Flags["chown"] != "1000:1000" || !slices.Equal(in[6].Args, []string{"src/", "./src/"}) {
		t.Errorf("COPY = %+v", in[6])
	}
}

func TestParseRefusals(t *testing.T) {
	cases := []struct {
		src   string
		class errdefs.Class
		msg   string
	}{
		{"FROM a\nRUN true\nVOLUME /data\nFROM b AS x\n", errdefs.NotSupported, "Dockerfile:4: multi-stage"},
		{"FROM a AS build\n", errdefs.NotSupported, "multi-stage"},
		{"FROM a\nCOPY --from=build /x /y\n", errdefs.NotSupported, "Dockerfile:2: COPY --from"},
		{"FROM a\nADD https://example.com/x.tgz /x\n", errdefs.NotSupported, "URL"},
		{"FROM a\nADD git@github.com:o/r.git /x\n", errdefs.NotSupported, "URL"},
		{"RUN true\n", errdefs.InvalidArgument, "before FROM"},
		{"# nothing\n", errdefs.InvalidArgument, "no FROM"},
		{"FROM a\nRUN --mount=type=cache,target=/x true\n", errdefs.NotSupported, "RUN --mount"},
		{"FROM a\nFROBNICATE\n", errdefs.NotSupported, "Dockerfile:2: FROBNICATE is not supported"},
		{"FROM a\nCOPY --user=root x /x\n", errdefs.NotSupported, "COPY --user"},
		{"FROM a\nRUN --chown=root true\n", errdefs.NotSupported, "RUN --chown"},
		{"FROM a\nRUN --network=none true\n", errdefs.NotSupported, "Dockerfile:2: RUN --network is not supported"},
		{"FROM a\nCOPY --parents a/./b /x\n", errdefs.NotSupported, "COPY --parents"},
		{"FROM a\nADD --checksum=sha256:00 x /x\n", errdefs.NotSupported, "ADD --checksum"},
		{"FROM a\nRUN --user true\n", errdefs.InvalidArgument, "Dockerfile:2: RUN --user needs a value"},
		{"FROM a\nLABEL x=1\nSTOPSIGNAL\n", errdefs.InvalidArgument, "Dockerfile:3: STOPSIGNAL requires exactly one argument"},
		{"FROM a\nRUN <<EOF\ntrue\n", errdefs.InvalidArgument, "Dockerfile:2: unterminated heredoc"},
		{"FROM a\nENV X=${NOPE:?required}\n", errdefs.InvalidArgument, "Dockerfile:2: failed to process \"${NOPE:?required}\": NOPE: required"},
		{"FROM a\nSHELL /bin/bash -c\n", errdefs.InvalidArgument, "Dockerfile:2: SHELL requires the arguments to be in JSON form"},
		{"FROM ${NOPE}\n", errdefs.InvalidArgument, "Dockerfile:1: FROM needs an image"},
		{"FROM a\nRUN " + strings.Repeat("x", 1<<16) + "\n", errdefs.InvalidArgument, "dockerfile line greater than max allowed size of 65535"},
		{"FROM a\n" + strings.Repeat("RUN true\n", 1<<17), errdefs.InvalidArgument, "larger than 1048576 bytes"},
	}
	for _, c := range cases {
		_, err := Parse(strings.NewReader(c.src), nil)
		if err == nil || errdefs.ClassOf(err) != c.class || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Parse(%q) = %v; want %v containing %q", c.src, err, c.class, c.msg)
		}
		if err != nil && !errors.Is(err, c.class.Sentinel()) {
			t.Errorf("error %v is not errors.Is its class", err)
		}
	}
}

// TestRunUser: RUN --user=NAME (berth's own flag) names the step's user
// and leaves the exec form intact.
func TestRunUser(t *testing.T) {
	f, err := Parse(strings.NewReader("FROM a\nRUN --user=nobody [\"/bin/sh\", \"-c\", \"id -u\"]\nRUN id -u\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	in := f.Instructions
	if in[0].Flags["user"] != "nobody" || !slices.Equal(in[0].Args, []string{"/bin/sh", "-c", "id -u"}) {
		t.Errorf("RUN --user = %+v", in[0])
	}
	if _, ok := in[1].Flags["user"]; ok {
		t.Errorf("a plain RUN has a user: %+v", in[1])
	}
}
