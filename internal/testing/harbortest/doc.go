// Package harbortest builds what the Harbor runner's tests share: task
// directories written as users write them, and a registry holding the
// fault-injecting fake provider in its chroot mode.
//
// Import it only from tests.
package harbortest
