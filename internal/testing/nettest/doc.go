// Package nettest holds the network fixtures of the sandbox attack tests
// (packages container and providers/local): marker servers a sandbox must
// not reach, the host's own addresses, and a network namespace joined to
// the host by a veth that stands in for "the host's other addresses" and
// "a machine beyond the host". It touches only loopback and namespaces it
// creates, and removes them when the test ends. ServeDNS is a scripted DNS
// server for the tests of code that resolves names (the image pull guard's
// DNS rebinding test).
package nettest
