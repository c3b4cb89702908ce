// Package archtest holds the test of berth's dependency rules, the arrows
// that must never exist (DESIGN.md, "Dependency rules"): a table of
// forbidden (from, to) pairs checked against `go list -deps`. A rule says
// that no package at or under a path prefix may depend, directly or
// through others, on one package. Add a rule where a re-homing removed an
// arrow, so that it cannot come back.
//
// Nothing imports it; `go test ./internal/testing/archtest` runs it.
package archtest
