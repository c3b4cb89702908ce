//go:build race

package k8s_test

// raceOn: the race pass of .ci/run skips the tests that only wait (a TTL
// running out); the plain pass runs them.
const raceOn = true
