//go:build race

package k8s_test

// raceOn: a -race run skips the tests that only wait (a TTL running out).
// .ci/run runs this package once, in its plain pass, which runs them.
const raceOn = true
