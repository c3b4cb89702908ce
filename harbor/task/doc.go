// Package task loads Harbor / Terminal-Bench task directories: task.toml
// (schema 1.0 through 1.4 and the legacy forms authors still publish),
// instruction.md, environment/, solution/ and tests/.
//
// Loading never stops at the first bad task: Load returns a Task whose
// Problems list says what is wrong, with file, line and field, and LoadDir
// returns every task of a tree, good and bad. Unknown keys are warnings, so
// tasks written for a newer Harbor still run.
//
// Import it from the Harbor runner and from tools that list tasks.
package task
