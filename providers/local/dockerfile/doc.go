// Package dockerfile reads the subset of the Dockerfile language that the
// local provider's image builder (package imagebuild, its only importer;
// serve's tests read its template recipes back with it) builds: FROM, RUN, COPY, ADD (of local files), ENV, WORKDIR, USER, ARG
// and SHELL. Parsing is BuildKit's (github.com/moby/buildkit's
// frontend/dockerfile parser, instructions and shell packages, as Docker
// uses them): line continuations, comments, the escape directive, heredocs,
// exec (JSON) and shell forms with invalid JSON read as the shell form, and
// ${VAR}, ${VAR:-x}, ${VAR:+x}, ${VAR:?msg} substitution in the
// instructions Docker substitutes in, from ARG (with ARG before FROM in
// scope of FROM only), ENV and the base image's environment. What this
// package adds is what BuildKit's dispatcher does with the parsed
// instructions (scopes of build arguments, heredoc scripts, SHELL) and
// berth's refusals: anything else is refused with the instruction and its
// line, classed NotSupported, so a user knows exactly what to change.
//
// One flag is berth's own: RUN --user=NAME runs that one step as NAME and
// leaves USER as it was. Docker has no such flag; berth serve writes it
// for E2B template steps, whose run commands each name their user.
package dockerfile
