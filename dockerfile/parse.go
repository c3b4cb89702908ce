package dockerfile

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/berth-sh/berth/sandbox/types"
)

// Instruction is one parsed, substituted instruction.
type Instruction struct {
	Line int    // 1-based line where it starts
	Cmd  string // upper case: FROM, RUN, COPY, ADD, ENV, WORKDIR, USER, ARG
	// Args are the instruction's arguments after substitution: RUN's argv
	// (["/bin/sh", "-c", script] for the shell form), COPY/ADD sources then
	// destination, ENV key/value pairs flattened, FROM's image.
	Args []string
	// Flags are --name=value options (COPY --chown=..., --chmod=...).
	Flags map[string]string
	// Raw is the instruction as written (continuations joined).
	Raw string
}

// File is a parsed Dockerfile.
type File struct {
	Base         string        // the FROM image, substituted
	Instructions []Instruction // after FROM
}

// Supported instructions. Others are refused.
var supported = []string{"FROM", "RUN", "COPY", "ADD", "ENV", "WORKDIR", "USER", "ARG"}

// Ignored instructions carry metadata a sandbox has no use for; they are
// accepted and dropped so real Dockerfiles still build.
var ignored = []string{"LABEL", "MAINTAINER", "EXPOSE", "CMD", "ENTRYPOINT", "STOPSIGNAL", "SHELL", "HEALTHCHECK", "VOLUME", "ONBUILD"}

// maxDockerfile bounds the input: a real Dockerfile is a few KB.
const maxDockerfile = 1 << 20

// Parse reads a Dockerfile. buildArgs override ARG defaults.
func Parse(r io.Reader, buildArgs map[string]string) (*File, error) {
	return ParseWithEnv(r, buildArgs, nil)
}

// ParseWithEnv is Parse with the base image's environment ("KEY=value"
// entries) in scope after FROM, as Docker has it: ENV PATH=/opt/bin:$PATH
// extends the base image's PATH. A builder parses once to learn the base,
// then again with its environment.
func ParseWithEnv(r io.Reader, buildArgs map[string]string, baseEnv []string) (*File, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxDockerfile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxDockerfile {
		return nil, types.Errorf(types.InvalidArgument, "Dockerfile is larger than %d bytes", maxDockerfile)
	}
	lines, err := logicalLines(string(data))
	if err != nil {
		return nil, err
	}
	f := &File{}
	vars := map[string]string{}
	seenFrom := false
	for _, ll := range lines {
		cmd, rest, _ := strings.Cut(ll.text, " ")
		cmd = strings.ToUpper(cmd)
		rest = strings.TrimSpace(rest)
		in := Instruction{Line: ll.line, Cmd: cmd, Raw: ll.text}
		if slices.Contains(ignored, cmd) {
			continue
		}
		if !slices.Contains(supported, cmd) {
			return nil, types.Errorf(types.NotSupported, "Dockerfile:%d: %s is not supported by this builder (supported: %s)", ll.line, cmd, strings.Join(supported, ", "))
		}
		if !seenFrom && cmd != "FROM" && cmd != "ARG" {
			return nil, types.Errorf(types.InvalidArgument, "Dockerfile:%d: %s before FROM", ll.line, cmd)
		}
		rest, in.Flags = flags(rest)
		switch cmd {
		case "FROM":
			if seenFrom {
				return nil, types.Errorf(types.NotSupported, "Dockerfile:%d: multi-stage builds (a second FROM) are not supported", ll.line)
			}
			delete(in.Flags, "platform") // one platform here: the host's
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return nil, types.Errorf(types.InvalidArgument, "Dockerfile:%d: FROM needs an image", ll.line)
			}
			if len(fields) > 1 {
				return nil, types.Errorf(types.NotSupported, "Dockerfile:%d: FROM ... AS (multi-stage) is not supported", ll.line)
			}
			f.Base = expand(fields[0], vars)
			seenFrom = true
			for _, kv := range baseEnv {
				if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
					vars[k] = v
				}
			}
			continue
		case "ARG":
			for _, kv := range strings.Fields(rest) {
				k, v, hasDefault := strings.Cut(kv, "=")
				if bv, ok := buildArgs[k]; ok {
					v = bv
				} else if !hasDefault {
					v = vars[k]
				}
				vars[k] = unquote(expand(v, vars))
				in.Args = append(in.Args, k, vars[k])
			}
		case "ENV":
			pairs, err := envPairs(rest, vars)
			if err != nil {
				return nil, types.Errorf(types.InvalidArgument, "Dockerfile:%d: %v", ll.line, err)
			}
			for i := 0; i < len(pairs); i += 2 {
				vars[pairs[i]] = pairs[i+1]
			}
			in.Args = pairs
		case "RUN":
			if args, ok := execForm(rest); ok {
				in.Args = args
			} else {
				in.Args = []string{"/bin/sh", "-c", rest}
			}
		case "COPY", "ADD":
			if _, ok := in.Flags["from"]; ok {
				return nil, types.Errorf(types.NotSupported, "Dockerfile:%d: COPY --from (multi-stage) is not supported", ll.line)
			}
			args, ok := execForm(rest)
			if !ok {
				args = strings.Fields(rest)
			}
			for i := range args {
				args[i] = expand(args[i], vars)
			}
			if len(args) < 2 {
				return nil, types.Errorf(types.InvalidArgument, "Dockerfile:%d: %s needs a source and a destination", ll.line, cmd)
			}
			for _, src := range args[:len(args)-1] {
				if strings.Contains(src, "://") {
					return nil, types.Errorf(types.NotSupported, "Dockerfile:%d: %s of a URL is not supported; only files from the build context", ll.line, cmd)
				}
				if path.IsAbs(src) || strings.HasPrefix(path.Clean(src), "..") {
					return nil, types.Errorf(types.InvalidArgument, "Dockerfile:%d: %s source %q is outside the build context", ll.line, cmd, src)
				}
			}
			in.Args = args
		case "WORKDIR", "USER":
			v := expand(strings.TrimSpace(rest), vars)
			if v == "" {
				return nil, types.Errorf(types.InvalidArgument, "Dockerfile:%d: %s needs a value", ll.line, cmd)
			}
			in.Args = []string{v}
		}
		for k := range in.Flags {
			copyFlag := (k == "chown" || k == "chmod") && (cmd == "COPY" || cmd == "ADD")
			if !copyFlag && !(k == "user" && cmd == "RUN") {
				return nil, types.Errorf(types.NotSupported, "Dockerfile:%d: %s --%s is not supported", ll.line, cmd, k)
			}
		}
		// ARG after FROM stays: the builder exports it to later RUNs
		// without persisting it in the image, as Docker does.
		if cmd != "ARG" || seenFrom {
			f.Instructions = append(f.Instructions, in)
		}
	}
	if !seenFrom {
		return nil, types.Errorf(types.InvalidArgument, "Dockerfile has no FROM")
	}
	return f, nil
}

type logicalLine struct {
	line int
	text string
}

// logicalLines joins continuations and drops comments and blank lines.
func logicalLines(s string) ([]logicalLine, error) {
	var out []logicalLine
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 64*1024), maxDockerfile)
	var cur strings.Builder
	start, n := 0, 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), " \t\r")
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\"))
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(line)
		out = append(out, logicalLine{line: start, text: strings.TrimSpace(cur.String())})
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		return nil, types.Errorf(types.InvalidArgument, "Dockerfile: %v", err)
	}
	if cur.Len() > 0 {
		out = append(out, logicalLine{line: start, text: strings.TrimSpace(cur.String())})
	}
	return out, nil
}

// flags strips leading --name=value options.
func flags(rest string) (string, map[string]string) {
	fl := map[string]string{}
	for strings.HasPrefix(rest, "--") {
		tok, after, _ := strings.Cut(rest, " ")
		k, v, _ := strings.Cut(strings.TrimPrefix(tok, "--"), "=")
		fl[k] = v
		rest = strings.TrimSpace(after)
	}
	return rest, fl
}

func execForm(s string) ([]string, bool) {
	if !strings.HasPrefix(s, "[") {
		return nil, false
	}
	var args []string
	if err := json.Unmarshal([]byte(s), &args); err != nil || len(args) == 0 {
		return nil, false
	}
	return args, true
}

// envPairs parses "K=V K2=V2" and the legacy "K V" form.
func envPairs(rest string, vars map[string]string) ([]string, error) {
	if !strings.Contains(strings.SplitN(rest, " ", 2)[0], "=") {
		k, v, _ := strings.Cut(rest, " ")
		if k == "" {
			return nil, fmt.Errorf("ENV needs a name")
		}
		return []string{k, expand(strings.TrimSpace(v), vars)}, nil
	}
	var out []string
	for _, tok := range splitQuoted(rest) {
		k, v, ok := strings.Cut(tok, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("ENV %q is not NAME=value", tok)
		}
		out = append(out, k, unquote(expand(v, vars)))
	}
	return out, nil
}

// splitQuoted splits on spaces outside double or single quotes.
func splitQuoted(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			cur.WriteRune(r)
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
			cur.WriteRune(r)
		case r == ' ' || r == '\t':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		return s[1 : len(s)-1]
	}
	return s
}

// expand substitutes ${VAR}, ${VAR:-default} and $VAR from vars; unknown
// variables become empty, as in Docker.
func expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) && s[i+1] == '$' {
			b.WriteByte('$')
			i++
			continue
		}
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		if s[i+1] == '{' {
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				b.WriteString(s[i:])
				break
			}
			body := s[i+2 : i+end]
			name, def, hasDef := strings.Cut(body, ":-")
			v, ok := vars[name]
			if (!ok || v == "") && hasDef {
				v = def
			}
			b.WriteString(v)
			i += end
			continue
		}
		j := i + 1
		for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || j > i+1 && s[j] >= '0' && s[j] <= '9') {
			j++
		}
		if j == i+1 {
			b.WriteByte(c)
			continue
		}
		b.WriteString(vars[s[i+1:j]])
		i = j - 1
	}
	return b.String()
}
