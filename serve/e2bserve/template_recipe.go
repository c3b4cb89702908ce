package e2bserve

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/berth-sh/berth/e2bapi"
	"github.com/berth-sh/berth/sandbox"
)

// A template's steps become a Dockerfile that the provider's builder runs
// (package imagebuild on local, which parses it as Docker does): one
// instruction per step, each written so that the parser reads back exactly
// the step's arguments. RUN is the exec form (JSON: newlines and quotes
// survive), COPY too, ENV the NAME="value" form; paths are escaped against
// the lexer (quotes, backslashes and '$', since Docker substitutes
// variables there and E2B does not). An instruction longer than a
// Dockerfile line may be is folded with continuations. The line a step
// starts on maps build errors and log lines back to the step's index,
// which is what the SDK reads to point at the builder call that failed.

// The body of POST /v2/templates/{templateID}/builds/{buildID} is
// e2bapi.TemplateBuildStartV2; fields the SDK sends that a build here does
// not use (a step's forceUpload, resolveSymlinks, gzip) are ignored, as
// E2B does.

// Step names of the build's first and last phases, as E2B reports them in
// a failure's reason; the steps between are "1", "2", ...
const (
	stepBase     = "base"
	stepFinalize = "finalize"
)

// recipe is a validated template.
type recipe struct {
	base       string // the FROM image
	dockerfile string
	lines      map[int]stepLine // Dockerfile line -> the step it is
	copies     []copySource     // one per COPY step, in order
	startCmd   string
	readyCmd   string
	force      bool // rebuild whatever is cached
	steps      int
	pull       *sandbox.PullPolicy // the base's pull, when a client named it
}

type stepLine struct {
	step string // "base", "1", ...
	show string // the step as the build log shows it
	raw  string // the instruction as the builder shows it (continuations joined)
}

// copySource is a COPY step's upload, unpacked into dir of the context.
type copySource struct {
	dir  string
	hash string
}

// runWrapper runs a RUN step's command as E2B's builder does (bash -l -c)
// where the image has bash, else with sh: images built here may be
// minimal.
const runWrapper = `if command -v bash >/dev/null 2>&1; then exec bash -l -c "$1"; fi; exec /bin/sh -c "$1"`

var (
	imageRefRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,511}$`)
	userRe      = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,63})?$`)
	envKeyRe    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,255}$`)
	modeRe      = regexp.MustCompile(`^0?[0-7]{3,4}$`)
	filesHashRe = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// maxCmdBytes bounds one command, start command, ready command or env
// value: recipes embed small archives in base64 in a command (the
// OpenEnv recipe's reach 60 KB). maxDockerfileBytes is what the builder's
// parser reads; the control plane's body limit comes first by default.
const (
	maxCmdBytes        = 256 << 10
	maxDockerfileBytes = 1 << 20
)

// badStep is a step's InvalidArgument, naming it as the SDK counts.
func badStep(i int, format string, args ...any) error {
	return sandbox.Errorf(sandbox.InvalidArgument, "step %d: "+format, append([]any{i + 1}, args...)...)
}

// oneLine refuses what would end a Dockerfile line or a C string.
func oneLine(s string) bool { return !strings.ContainsAny(s, "\x00\n\r") }

// literal keeps s as it is through the Dockerfile lexer, which reads
// quotes, backslashes and '$' outside quotes.
func literal(s string) string { return lexEscapes.Replace(s) }

var lexEscapes = strings.NewReplacer(`\`, `\\`, `$`, `\$`, `"`, `\"`, `'`, `\'`)

// quoted is s in double quotes as the lexer reads it back, '$' left to
// substitute: an ENV value as E2B's builder sets it.
func quoted(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// maxLine is how long a line of the Dockerfile may be: BuildKit's parser
// (and so Docker's, and the local builder's) reads at most 64 KiB a line.
const maxLine = 60 << 10

// fold breaks an instruction into lines of at most maxLine bytes with
// continuations, which the parser joins back byte for byte. A break never
// follows a backslash (that would escape the continuation) nor comes
// before a blank or '#' (the parser drops a continuation line that starts
// so, as a comment); where there is no such place the line stays long and
// the parser refuses it.
func fold(line string) string {
	var b strings.Builder
	for len(line) > maxLine {
		cut := maxLine
		for cut > maxLine/2 && (line[cut-1] == '\\' || strings.IndexByte(" \t#", line[cut]) >= 0) {
			cut--
		}
		if cut == maxLine/2 {
			break
		}
		b.WriteString(line[:cut] + "\\\n")
		line = line[cut:]
	}
	b.WriteString(line)
	return b.String()
}

// jsonLine is v as one line of JSON, '<' and '&' as themselves.
func jsonLine(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

// globBase is the part of a COPY source before its first wildcard, as
// E2B's builder copies it: the SDK already sent only the matching files.
func globBase(src string) string {
	parts := strings.Split(path.Clean(src), "/")
	for i, p := range parts {
		if strings.ContainsAny(p, "*?[{\\") {
			if i == 0 {
				return "."
			}
			return strings.Join(parts[:i], "/")
		}
	}
	return path.Clean(src)
}

// newRecipe validates b over base (the resolved FROM image) and writes
// its Dockerfile. present says whether the key uploaded a COPY's files.
func newRecipe(b e2bapi.TemplateBuildStartV2, base string, maxSteps int, present func(hash string) bool) (*recipe, error) {
	if len(b.FromImageRegistry) > 0 && string(b.FromImageRegistry) != "null" {
		// Never echoed: it holds registry credentials.
		return nil, sandbox.Errorf(sandbox.NotSupported, "fromImageRegistry (registry credentials) is not supported by berth serve: base images must be public or already in the provider's store")
	}
	if !imageRefRe.MatchString(base) {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "base image %q is not an image reference", base)
	}
	if len(b.Steps) > maxSteps {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "the template has %d steps; this server builds at most %d", len(b.Steps), maxSteps)
	}
	for _, c := range []struct{ name, cmd string }{{"startCmd", b.StartCmd}, {"readyCmd", b.ReadyCmd}} {
		if len(c.cmd) > maxCmdBytes || strings.ContainsRune(c.cmd, 0) {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "%s is longer than %d bytes or holds a NUL byte", c.name, maxCmdBytes)
		}
	}
	r := &recipe{base: base, lines: map[int]stepLine{}, startCmd: b.StartCmd, readyCmd: b.ReadyCmd, force: b.Force, steps: len(b.Steps)}
	var df strings.Builder
	next := 1 // the line the next instruction starts on
	emit := func(step, show, line string) {
		r.lines[next] = stepLine{step: step, show: show, raw: line}
		folded := fold(line)
		next += 1 + strings.Count(folded, "\n")
		df.WriteString(folded + "\n")
	}
	emit(stepBase, "FROM "+base, "FROM "+base)
	user := "" // the last USER step's; "" is the image's
	for i, st := range b.Steps {
		name := strconv.Itoa(i + 1)
		r.force = r.force || st.Force
		switch strings.ToUpper(st.Type) {
		case "RUN":
			line, err := runLine(i, st)
			if err != nil {
				return nil, err
			}
			emit(name, "RUN "+st.Args[0], line)
		case "COPY":
			line, err := copyLine(i, st, user, present)
			if err != nil {
				return nil, err
			}
			r.copies = append(r.copies, copySource{dir: "s" + name, hash: st.FilesHash})
			emit(name, "COPY "+st.Args[0]+" "+st.Args[1], line)
		case "ENV":
			if len(st.Args) == 0 || len(st.Args)%2 != 0 {
				return nil, badStep(i, "ENV takes name and value pairs, got %d arguments", len(st.Args))
			}
			for j := 0; j < len(st.Args); j += 2 {
				k, v := st.Args[j], st.Args[j+1]
				if !envKeyRe.MatchString(k) {
					return nil, badStep(i, "ENV name %q is not a variable name", k)
				}
				if !oneLine(v) || len(v) > maxCmdBytes {
					return nil, badStep(i, "ENV %s: values with newlines or NUL bytes, or over %d bytes, are not supported", k, maxCmdBytes)
				}
				emit(name, "ENV "+k+"="+v, "ENV "+k+"="+quoted(v))
			}
		case "WORKDIR":
			if len(st.Args) != 1 || st.Args[0] == "" || !oneLine(st.Args[0]) {
				return nil, badStep(i, "WORKDIR takes one directory on one line")
			}
			emit(name, "WORKDIR "+st.Args[0], "WORKDIR "+literal(st.Args[0]))
		case "USER":
			if len(st.Args) != 1 || !userRe.MatchString(st.Args[0]) {
				return nil, badStep(i, "USER takes one user name, got %q", st.Args)
			}
			user = st.Args[0]
			emit(name, "USER "+user, "USER "+user)
		default:
			return nil, badStep(i, "type %q is not supported (RUN, COPY, ENV, WORKDIR, USER)", st.Type)
		}
	}
	r.dockerfile = df.String()
	if len(r.dockerfile) > maxDockerfileBytes-256 { // room for the force line
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "the template's steps make a Dockerfile of %d bytes; the builder reads at most %d", len(r.dockerfile), maxDockerfileBytes-256)
	}
	return r, nil
}

// runLine validates a RUN step and writes its line: the exec form of the
// wrapper, as the step's user when it names one (RUN --user, berth's own).
func runLine(i int, st e2bapi.TemplateStep) (string, error) {
	if len(st.Args) < 1 || len(st.Args) > 2 || st.Args[0] == "" {
		return "", badStep(i, "RUN takes a command and an optional user, got %d arguments", len(st.Args))
	}
	cmd := st.Args[0]
	if len(cmd) > maxCmdBytes || strings.ContainsRune(cmd, 0) {
		return "", badStep(i, "RUN command is longer than %d bytes or holds a NUL byte", maxCmdBytes)
	}
	flag := ""
	if len(st.Args) == 2 && st.Args[1] != "" {
		if !userRe.MatchString(st.Args[1]) {
			return "", badStep(i, "RUN user %q is not a user name", st.Args[1])
		}
		flag = "--user=" + st.Args[1] + " "
	}
	return "RUN " + flag + jsonLine([]string{"/bin/sh", "-c", runWrapper, "sh", cmd}), nil
}

// copyLine validates a COPY step and writes its line. The source is read
// from the step's own directory of the context (its upload unpacked), so
// uploads of two steps never mix; the owner defaults to the current USER,
// as in E2B.
func copyLine(i int, st e2bapi.TemplateStep, user string, present func(string) bool) (string, error) {
	if len(st.Args) < 2 || len(st.Args) > 4 {
		return "", badStep(i, "COPY takes a source, a destination, an optional owner and mode, got %d arguments", len(st.Args))
	}
	src, dest := st.Args[0], st.Args[1]
	if src == "" || path.IsAbs(src) || !oneLine(src) {
		return "", badStep(i, "COPY source %q is not a relative path in the build context", src)
	}
	if c := path.Clean(src); c == ".." || strings.HasPrefix(c, "../") {
		return "", badStep(i, "COPY source %q is outside the build context", src)
	}
	if dest == "" || !oneLine(dest) {
		return "", badStep(i, "COPY destination %q is empty or not one line", dest)
	}
	if !filesHashRe.MatchString(st.FilesHash) {
		return "", badStep(i, "COPY needs the filesHash of its upload (64 hex digits)")
	}
	if !present(st.FilesHash) {
		return "", badStep(i, "COPY files %s were not uploaded (GET /templates/{templateID}/files/{hash}, then PUT to its url)", st.FilesHash)
	}
	var flags strings.Builder
	owner := user
	if len(st.Args) > 2 && st.Args[2] != "" {
		owner = st.Args[2]
	}
	if owner != "" {
		if !userRe.MatchString(owner) {
			return "", badStep(i, "COPY owner %q is not user[:group]", owner)
		}
		flags.WriteString("--chown=" + owner + " ")
	}
	if len(st.Args) > 3 && st.Args[3] != "" {
		if !modeRe.MatchString(st.Args[3]) {
			return "", badStep(i, "COPY mode %q is not an octal mode", st.Args[3])
		}
		flags.WriteString("--chmod=" + st.Args[3] + " ")
	}
	from := path.Join("s"+strconv.Itoa(i+1), globBase(src))
	return "COPY " + flags.String() + jsonLine([]string{literal(from), literal(dest)}), nil
}

// digest names what the template builds for one key: the Dockerfile, the
// uploads it copies and the start and ready commands. Equal digests build
// equal images, so a build whose digest is built is a cache hit.
func (r *recipe) digest(keyID string) string {
	h := sha256.New()
	fmt.Fprintf(h, "berth-serve-template/1\nkey %s\n%s", keyID, r.dockerfile)
	for _, c := range r.copies {
		fmt.Fprintf(h, "copy %s %s\n", c.dir, c.hash)
	}
	fmt.Fprintf(h, "start %q\nready %q\n", r.startCmd, r.readyCmd)
	return hex.EncodeToString(h.Sum(nil))
}

// stepOf finds the step an error of the builder names by its Dockerfile
// line ("Dockerfile:N: ..."), or "" when it names none.
func (r *recipe) stepOf(msg string) string {
	m := dockerfileLineRe.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	n, _ := strconv.Atoi(m[1])
	return r.lines[n].step
}

var dockerfileLineRe = regexp.MustCompile(`Dockerfile:(\d+)`)
