package dockerfile

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// Instruction is one parsed, substituted instruction.
type Instruction struct {
	Line int    // 1-based line where it starts
	Cmd  string // upper case: RUN, COPY, ADD, ENV, WORKDIR, USER, ARG
	// Args are the instruction's arguments after substitution, as Docker
	// runs them: RUN's argv (the SHELL, by default ["/bin/sh", "-c"], and
	// the script for the shell form), COPY/ADD sources then destination,
	// ENV and ARG key/value pairs flattened (an ARG without a value is
	// left out: it is unset), WORKDIR's and USER's value.
	Args []string
	// Flags are the --name=value options given: COPY and ADD --chown and
	// --chmod (substituted, as Docker does), RUN --user (berth's own).
	Flags map[string]string
	// Raw is the instruction's first line as written, continuations
	// joined; a heredoc's body is not part of it.
	Raw string
	// Heredocs are a COPY or ADD's inline sources (COPY <<EOF /dest): each
	// a file named Name holding Data, mode 0644 unless --chmod, copied to
	// the destination after the sources of Args. For a RUN whose command
	// is one heredoc starting with "#!", Heredocs[0] is that script: Docker
	// runs it as the file PipesDir+Name, mode 0755, there for that step
	// only, and Args name that file.
	Heredocs []Heredoc
}

// Heredoc is one inline file of an instruction.
type Heredoc struct {
	Name string
	Data string
}

// PipesDir is where Docker puts a RUN's heredoc script for the step.
const PipesDir = "/dev/pipes/"

// File is a parsed Dockerfile.
type File struct {
	Base         string        // the FROM image, substituted
	Instructions []Instruction // after FROM
}

// Supported instructions. Others are refused.
var supported = []string{"FROM", "RUN", "COPY", "ADD", "ENV", "WORKDIR", "USER", "ARG", "SHELL"}

// Ignored instructions carry metadata a sandbox has no use for; they are
// checked as Docker checks them and dropped, so real Dockerfiles build.
var ignored = []string{"LABEL", "MAINTAINER", "EXPOSE", "CMD", "ENTRYPOINT", "STOPSIGNAL", "HEALTHCHECK", "VOLUME", "ONBUILD"}

// maxDockerfile bounds the input: a real Dockerfile is a few KB. BuildKit
// bounds each line at 64 KiB too.
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
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "Dockerfile is larger than %d bytes", maxDockerfile)
	}
	res, err := parser.Parse(bytes.NewReader(data))
	if err != nil {
		return nil, syntaxErr(err, data)
	}
	d := &dispatcher{
		lex: shell.NewLex(res.EscapeToken), buildArgs: buildArgs, baseEnv: baseEnv,
		global: platformArgs(buildArgs), shell: []string{"/bin/sh", "-c"},
	}
	for _, n := range res.AST.Children {
		if err := d.node(n); err != nil {
			return nil, err
		}
	}
	if !d.seenFrom {
		return nil, errdefs.Errorf(errdefs.InvalidArgument, "Dockerfile has no FROM")
	}
	return &d.file, nil
}

// syntaxErr classes an error of BuildKit's parser, naming its line.
func syntaxErr(err error, data []byte) error {
	// BuildKit's words for a file of only comments and blank lines, and
	// for a line its scanner cannot hold, which it locates on the line
	// before.
	switch msg := err.Error(); {
	case strings.Contains(msg, "file with no instructions"):
		return errdefs.Errorf(errdefs.InvalidArgument, "Dockerfile has no FROM")
	case strings.Contains(msg, "dockerfile line greater than"):
		for n, l := range bytes.Split(data, []byte("\n")) {
			if len(l) >= bufio.MaxScanTokenSize {
				return lineErr(n+1, errdefs.InvalidArgument, err)
			}
		}
	}
	return lineErr(errLine(err), errdefs.InvalidArgument, err)
}

// errLine is the first line BuildKit's error locates, or 0.
func errLine(err error) int {
	var loc *parser.LocationError
	if errors.As(err, &loc) && len(loc.Locations) > 0 && len(loc.Locations[0]) > 0 {
		return loc.Locations[0][0].Start.Line
	}
	return 0
}

func lineErr(line int, c errdefs.Class, err error) error {
	if line <= 0 {
		return errdefs.Errorf(c, "Dockerfile: %v", err)
	}
	return errdefs.Errorf(c, "Dockerfile:%d: %v", line, err)
}

// dispatcher walks the parsed instructions as BuildKit's dispatcher does,
// keeping the scopes substitution reads.
type dispatcher struct {
	lex       *shell.Lex
	buildArgs map[string]string
	baseEnv   []string
	global    *vars    // platform args and ARGs before FROM: FROM's scope
	env       *vars    // after FROM: the base image's env, then ARG and ENV
	shell     []string // SHELL: what runs a shell-form RUN
	seenFrom  bool
	file      File
}

// node handles one instruction of the file.
func (d *dispatcher) node(n *parser.Node) error {
	cmd := strings.ToUpper(n.Value)
	line := n.StartLine
	skip := slices.Contains(ignored, cmd)
	if !skip && !slices.Contains(supported, cmd) {
		return errdefs.Errorf(errdefs.NotSupported, "Dockerfile:%d: %s is not supported by this builder (supported: %s)", line, cmd, strings.Join(supported, ", "))
	}
	if !d.seenFrom && cmd != "FROM" && cmd != "ARG" {
		return errdefs.Errorf(errdefs.InvalidArgument, "Dockerfile:%d: %s before FROM", line, cmd)
	}
	in := Instruction{Line: line, Cmd: cmd, Raw: strings.TrimSpace(n.Original)}
	if !skip {
		var err error
		if in.Flags, err = takeFlags(n, cmd); err != nil {
			return err
		}
	}
	parsed, err := instructions.ParseInstruction(n)
	if err != nil {
		return lineErr(line, errdefs.InvalidArgument, err)
	}
	if skip {
		return nil
	}
	if _, isArg := parsed.(*instructions.ArgCommand); !isArg {
		// Docker substitutes in what each command's Expand names; an ARG's
		// default is substituted as it is declared.
		if err := d.expand(parsed); err != nil {
			return lineErr(line, errdefs.InvalidArgument, err)
		}
	}
	keep, err := d.dispatch(parsed, &in)
	if err != nil {
		return err
	}
	if keep {
		d.file.Instructions = append(d.file.Instructions, in)
	}
	return nil
}

// dispatch fills in from the parsed command; keep says whether the
// builder gets it (FROM, SHELL and ARG before FROM only set scopes).
func (d *dispatcher) dispatch(parsed any, in *Instruction) (keep bool, err error) {
	switch c := parsed.(type) {
	case *instructions.Stage:
		return false, d.from(c, in.Line)
	case *instructions.ArgCommand:
		return d.seenFrom, d.arg(c, in)
	case *instructions.ShellCommand:
		d.shell = slices.Clone(c.Shell)
		return false, nil
	case *instructions.EnvCommand:
		for _, kv := range c.Env {
			d.env.set(kv.Key, kv.Value)
			in.Args = append(in.Args, kv.Key, kv.Value)
		}
	case *instructions.RunCommand:
		return true, d.run(c, in)
	case *instructions.CopyCommand:
		return true, copyArgs(c.SourcesAndDest, c.Chown, c.Chmod, in)
	case *instructions.AddCommand:
		return true, copyArgs(c.SourcesAndDest, c.Chown, c.Chmod, in)
	case *instructions.WorkdirCommand:
		in.Args = []string{c.Path}
	case *instructions.UserCommand:
		in.Args = []string{c.User}
	default:
		return false, errdefs.Errorf(errdefs.NotSupported, "Dockerfile:%d: %s is not supported by this builder", in.Line, in.Cmd)
	}
	return true, nil
}

// expand substitutes variables in what Docker substitutes in: each
// command's Expand, with the lexer of the file's escape character, and the
// bodies of unquoted COPY heredocs (quotes kept, as Docker keeps them).
func (d *dispatcher) expand(parsed any) error {
	if ex, ok := parsed.(instructions.SupportsSingleWordExpansion); ok {
		err := ex.Expand(func(word string) (string, error) {
			s, _, err := d.lex.ProcessWord(word, d.env)
			return s, err
		})
		if err != nil {
			return err
		}
	}
	if ex, ok := parsed.(instructions.SupportsSingleWordExpansionRaw); ok {
		raw := shell.NewLex('\\')
		raw.SkipProcessQuotes = true
		return ex.ExpandRaw(func(word string) (string, error) {
			s, _, err := raw.ProcessWord(word, d.env)
			return s, err
		})
	}
	return nil
}

// from reads the one FROM: its image, substituted from the ARGs before it
// (and the platform's), and the base image's environment from then on.
func (d *dispatcher) from(c *instructions.Stage, line int) error {
	if d.seenFrom {
		return errdefs.Errorf(errdefs.NotSupported, "Dockerfile:%d: multi-stage builds (a second FROM) are not supported", line)
	}
	if c.Name != "" {
		return errdefs.Errorf(errdefs.NotSupported, "Dockerfile:%d: FROM ... AS (multi-stage) is not supported", line)
	}
	res, err := d.lex.ProcessWordWithMatches(c.BaseName, d.global)
	if err != nil {
		return lineErr(line, errdefs.InvalidArgument, err)
	}
	if res.Result == "" {
		return errdefs.Errorf(errdefs.InvalidArgument, "Dockerfile:%d: FROM needs an image (%s is empty)", line, c.BaseName)
	}
	d.file.Base = res.Result
	d.seenFrom = true
	d.env = &vars{}
	for _, kv := range d.baseEnv {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			d.env.set(k, v)
		}
	}
	return nil
}
