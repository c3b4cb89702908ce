package dockerfile

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// render is one instruction as the tests compare it: its line, command,
// flags, argv and heredocs.
func render(in Instruction) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", in.Line, in.Cmd)
	for _, k := range slices.Sorted(maps.Keys(in.Flags)) {
		fmt.Fprintf(&b, " --%s=%s", k, in.Flags[k])
	}
	fmt.Fprintf(&b, " %q", in.Args)
	for _, h := range in.Heredocs {
		fmt.Fprintf(&b, " <<%s=%q", h.Name, h.Data)
	}
	return b.String()
}

func renderAll(f *File) []string {
	var out []string
	for _, in := range f.Instructions {
		out = append(out, render(in))
	}
	return out
}

// taskCase is a Dockerfile as task authors write them and what the
// builder gets from it, as Docker (BuildKit) reads it.
type taskCase struct {
	name    string
	src     string
	args    map[string]string
	baseEnv []string
	base    string
	want    []string
}

var taskCases = []taskCase{
	{
		name: "apt-get with continuations and a comment inside them",
		src: `FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624

# Install the tools the task needs.
RUN apt-get update && apt-get install -y --no-install-recommends \
    curl \
    git \
    # python for the tests
    python3 python3-pip \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.txt /app/
RUN pip install --no-cache-dir -r requirements.txt
COPY . /app/
CMD ["bash"]
`,
		base: "ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624",
		want: []string{
			`4 RUN ["/bin/sh" "-c" "apt-get update && apt-get install -y --no-install-recommends     curl     git     python3 python3-pip  && rm -rf /var/lib/apt/lists/*"]`,
			`11 WORKDIR ["/app"]`,
			`12 COPY ["requirements.txt" "/app/"]`,
			`13 RUN ["/bin/sh" "-c" "pip install --no-cache-dir -r requirements.txt"]`,
			`14 COPY ["." "/app/"]`,
		},
	},
	{
		name: "ENV in both syntaxes, PATH from the base image",
		src: `FROM python:3.13-slim-bookworm
ENV DEBIAN_FRONTEND=noninteractive
ENV PYTHONUNBUFFERED 1
ENV PATH="/root/.local/bin:${PATH}" \
    APP_HOME=/app LANG=C.UTF-8
ENV GREETING hello "quoted" world
WORKDIR $APP_HOME
RUN echo "$APP_HOME $GREETING"
`,
		baseEnv: []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		base:    "python:3.13-slim-bookworm",
		want: []string{
			`2 ENV ["DEBIAN_FRONTEND" "noninteractive"]`,
			`3 ENV ["PYTHONUNBUFFERED" "1"]`,
			`4 ENV ["PATH" "/root/.local/bin:/usr/local/bin:/usr/bin:/bin" "APP_HOME" "/app" "LANG" "C.UTF-8"]`,
			// The legacy form's value goes through the lexer too: quotes go.
			`6 ENV ["GREETING" "hello quoted world"]`,
			`7 WORKDIR ["/app"]`,
			// RUN is not substituted: the shell does that.
			`8 RUN ["/bin/sh" "-c" "echo \"$APP_HOME $GREETING\""]`,
		},
	},
	{
		name: "heredoc RUN scripts: plain, with a shebang, chomped, and one a command reads",
		src: `FROM debian:bookworm-slim
RUN <<EOF
set -e
mkdir -p /app/data
echo "$HOME" > /app/data/home.txt
EOF
RUN <<'PY'
#!/usr/bin/env python3
import os
print(os.getcwd())
PY
RUN <<-EOT
	echo tabs stripped
	EOT
RUN cat <<'EOF' > /usr/local/bin/run.sh && chmod +x /usr/local/bin/run.sh
#!/bin/bash
echo "$@"
EOF
RUN python3 - <<EOF
print("stdin")
EOF
`,
		base: "debian:bookworm-slim",
		want: []string{
			`2 RUN ["/bin/sh" "-c" "set -e\nmkdir -p /app/data\necho \"$HOME\" > /app/data/home.txt\n"]`,
			`7 RUN ["/bin/sh" "-c" "/dev/pipes/PY"] <<PY="#!/usr/bin/env python3\nimport os\nprint(os.getcwd())\n"`,
			`12 RUN ["/bin/sh" "-c" "echo tabs stripped\n"]`,
			`15 RUN ["/bin/sh" "-c" "cat <<'EOF' > /usr/local/bin/run.sh && chmod +x /usr/local/bin/run.sh\n#!/bin/bash\necho \"$@\"\nEOF"]`,
			`19 RUN ["/bin/sh" "-c" "python3 - <<EOF\nprint(\"stdin\")\nEOF"]`,
		},
	},
	{
		name: "COPY heredocs, --chown from ARGs, exec-form COPY with spaces",
		src: `FROM ubuntu:24.04
ARG UID=1000
ARG GID=${UID}
ENV APP_NAME=solver
COPY --chown=${UID}:${GID} --chmod=755 src/ /app/src/
COPY <<EOF /app/config.json
{"name": "$APP_NAME", "debug": false}
EOF
COPY <<'EOF' /etc/motd
literal $APP_NAME
EOF
COPY <<a.txt <<b.txt /opt/
A
a.txt
B
b.txt
COPY ["my file.txt", "/app/with space/"]
ADD --chown=nobody archive.tar.gz /opt/
`,
		base: "ubuntu:24.04",
		want: []string{
			`2 ARG ["UID" "1000"]`,
			`3 ARG ["GID" "1000"]`,
			`4 ENV ["APP_NAME" "solver"]`,
			`5 COPY --chmod=755 --chown=1000:1000 ["src/" "/app/src/"]`,
			`6 COPY ["/app/config.json"] <<EOF="{\"name\": \"solver\", \"debug\": false}\n"`,
			`9 COPY ["/etc/motd"] <<EOF="literal $APP_NAME\n"`,
			`12 COPY ["/opt/"] <<a.txt="A\n" <<b.txt="B\n"`,
			`17 COPY ["my file.txt" "/app/with space/"]`,
			`18 ADD --chown=nobody ["archive.tar.gz" "/opt/"]`,
		},
	},
	{
		name: "ARG before FROM is FROM's only, unless declared again",
		src: `ARG PY_VERSION=3.12
ARG VARIANT
FROM python:${PY_VERSION}-slim${VARIANT:+-}${VARIANT}
ARG PY_VERSION
ARG NOT_GIVEN
ARG TARGETARCH
ENV PY=$PY_VERSION ARCH=$TARGETARCH UNSET=${NOT_GIVEN:-default} SEEN=${VARIANT:-none}
USER ${APP_USER:-nobody}
`,
		args: map[string]string{"VARIANT": "bookworm"},
		base: "python:3.12-slim-bookworm",
		want: []string{
			`4 ARG ["PY_VERSION" "3.12"]`,
			`5 ARG []`,
			`6 ARG ["TARGETARCH" "` + runtime.GOARCH + `"]`,
			`7 ENV ["PY" "3.12" "ARCH" "` + runtime.GOARCH + `" "UNSET" "default" "SEEN" "none"]`,
			`8 USER ["nobody"]`,
		},
	},
	{
		name: "exec form, invalid JSON read as the shell form, SHELL",
		src: `FROM node:22
RUN ["npm", "install", "-g", "pnpm"]
RUN [ "echo", 'single quotes are not JSON' ]
RUN ["unterminated"
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN curl -fsSL https://example.com/install.sh | bash
RUN ["/bin/echo", "exec form ignores SHELL"]
ENTRYPOINT ["node"]
EXPOSE 3000
LABEL org.opencontainers.image.source="https://example.com"
HEALTHCHECK --interval=30s CMD curl -f http://localhost:3000/ || exit 1
`,
		base: "node:22",
		want: []string{
			`2 RUN ["npm" "install" "-g" "pnpm"]`,
			`3 RUN ["/bin/sh" "-c" "[ \"echo\", 'single quotes are not JSON' ]"]`,
			`4 RUN ["/bin/sh" "-c" "[\"unterminated\""]`,
			`6 RUN ["/bin/bash" "-o" "pipefail" "-c" "curl -fsSL https://example.com/install.sh | bash"]`,
			`7 RUN ["/bin/echo" "exec form ignores SHELL"]`,
		},
	},
	{
		name: "the escape directive",
		src:  "# escape=`\nFROM mcr.example/base\nRUN echo one `\n    two\nWORKDIR C:\\app\nENV P=a`$b\n",
		base: "mcr.example/base",
		want: []string{
			`3 RUN ["/bin/sh" "-c" "echo one     two"]`,
			`5 WORKDIR ["C:\\app"]`,
			`6 ENV ["P" "a$b"]`,
		},
	},
	{
		name: "RUN --user (berth's own) with every form",
		src: `FROM debian:bookworm-slim
RUN --user=app ["/bin/sh", "-c", "id -u"]
RUN --user=root apt-get install -y curl
RUN --user=app <<EOF
whoami
EOF
`,
		base: "debian:bookworm-slim",
		want: []string{
			`2 RUN --user=app ["/bin/sh" "-c" "id -u"]`,
			`3 RUN --user=root ["/bin/sh" "-c" "apt-get install -y curl"]`,
			`4 RUN --user=app ["/bin/sh" "-c" "whoami\n"]`,
		},
	},
}

// TestTaskDockerfiles: Dockerfiles in the forms task authors write give
// the builder what Docker would run, line by line.
func TestTaskDockerfiles(t *testing.T) {
	for _, c := range taskCases {
		t.Run(c.name, func(t *testing.T) {
			f, err := ParseWithEnv(strings.NewReader(c.src), c.args, c.baseEnv)
			if err != nil {
				t.Fatal(err)
			}
			if f.Base != c.base {
				t.Errorf("base %q, want %q", f.Base, c.base)
			}
			got := renderAll(f)
			for i := range max(len(got), len(c.want)) {
				g, w := at(got, i), at(c.want, i)
				if g != w {
					t.Errorf("instruction %d:\n got %s\nwant %s", i, g, w)
				}
			}
		})
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}
