// Package dockerfile parses the subset of the Dockerfile language that
// berth's local provider builds: FROM, RUN, COPY, ADD (of local files), ENV,
// WORKDIR, USER and ARG, with line continuations, comments, the exec (JSON)
// and shell forms, and ${VAR} / $VAR substitution from ARG and ENV.
// Anything else is refused with the instruction and its line, classed
// NotSupported, so a user knows exactly what to change.
//
// One flag is berth's own: RUN --user=NAME runs that one step as NAME and
// leaves USER as it was. Docker has no such flag; berth serve writes it
// for E2B template steps, whose run commands each name their user.
//
// Import it from providers that build images from a task's environment/.
package dockerfile
