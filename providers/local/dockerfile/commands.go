package dockerfile

import (
	"slices"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"

	"github.com/berth-sh/berth/sandbox/errdefs"
)

// run makes a RUN's argv as BuildKit's dispatcher does: the exec form as
// written; the shell form after the SHELL; a command that is one heredoc
// runs its body, or, when the body starts with "#!", the body as a file of
// its own; other heredocs are handed to the shell with their bodies.
func (d *dispatcher) run(c *instructions.RunCommand, in *Instruction) error {
	args := c.CmdLine
	if len(c.Files) > 0 {
		if len(args) != 1 || !c.PrependShell {
			return errdefs.Errorf(errdefs.InvalidArgument, "Dockerfile:%d: RUN: a heredoc in the exec form", in.Line)
		}
		if parser.MustParseHeredoc(args[0]) != nil {
			f := c.Files[0]
			data := f.Data
			if f.Chomp {
				data = parser.ChompHeredocContent(data)
			}
			args = []string{data}
			if strings.HasPrefix(data, "#!") {
				if f.Name == "" || strings.Contains(f.Name, "/") || f.Name == "." || f.Name == ".." {
					return errdefs.Errorf(errdefs.InvalidArgument, "Dockerfile:%d: RUN: heredoc name %q is not a file name", in.Line, f.Name)
				}
				in.Heredocs = []Heredoc{{Name: f.Name, Data: data}}
				args = []string{PipesDir + f.Name}
			}
		} else {
			var b strings.Builder
			b.WriteString(args[0])
			for _, f := range c.Files {
				b.WriteString("\n" + f.Data + f.Name)
			}
			args = []string{b.String()}
		}
	}
	if c.PrependShell {
		args = append(slices.Clone(d.shell), strings.Join(args, " "))
	}
	if len(args) == 0 {
		return errdefs.Errorf(errdefs.InvalidArgument, "Dockerfile:%d: RUN needs a command", in.Line)
	}
	in.Args = args
	return nil
}

// copyArgs fills a COPY or ADD: its sources (read from the build context,
// as Docker reads an absolute or climbing path: from the context's root)
// and destination, its substituted --chown and --chmod, its heredocs.
func copyArgs(sd instructions.SourcesAndDest, chown, chmod string, in *Instruction) error {
	for _, src := range sd.SourcePaths {
		if strings.Contains(src, "://") || strings.HasPrefix(src, "git@") {
			return errdefs.Errorf(errdefs.NotSupported, "Dockerfile:%d: %s of a URL is not supported; only files from the build context", in.Line, in.Cmd)
		}
	}
	in.Args = append(slices.Clone(sd.SourcePaths), sd.DestPath)
	for _, sc := range sd.SourceContents {
		in.Heredocs = append(in.Heredocs, Heredoc{Name: sc.Path, Data: sc.Data})
	}
	for k, v := range map[string]string{"chown": chown, "chmod": chmod} {
		if _, ok := in.Flags[k]; ok {
			in.Flags[k] = v
		}
	}
	return nil
}

// allowed are the flags berth's builder honours: FROM --platform (one
// platform here, the host's), RUN --user (berth's own), COPY and ADD
// --chown and --chmod.
var allowed = map[string][]string{
	"FROM": {"platform"}, "RUN": {"user"}, "COPY": {"chown", "chmod"}, "ADD": {"chown", "chmod"},
}

// takeFlags reads an instruction's --name[=value] flags, refusing those
// the builder does not honour, and takes RUN --user off the node, as
// BuildKit does not know it.
func takeFlags(n *parser.Node, cmd string) (map[string]string, error) {
	fl := map[string]string{}
	var keep []string
	for _, raw := range n.Flags {
		k, v, hasValue := strings.Cut(strings.TrimPrefix(raw, "--"), "=")
		switch {
		case cmd == "COPY" && k == "from":
			return nil, errdefs.Errorf(errdefs.NotSupported, "Dockerfile:%d: COPY --from (multi-stage) is not supported", n.StartLine)
		case !slices.Contains(allowed[cmd], k):
			return nil, errdefs.Errorf(errdefs.NotSupported, "Dockerfile:%d: %s --%s is not supported", n.StartLine, cmd, k)
		case cmd == "RUN" && k == "user":
			if !hasValue || v == "" {
				return nil, errdefs.Errorf(errdefs.InvalidArgument, "Dockerfile:%d: RUN --user needs a value (--user=NAME)", n.StartLine)
			}
			fl[k] = v
			continue
		}
		if k != "platform" {
			fl[k] = v
		}
		keep = append(keep, raw)
	}
	n.Flags = keep
	return fl, nil
}
