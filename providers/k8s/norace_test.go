//go:build !race

package k8s_test

const raceOn = false
