// Package servetest holds what the tests of berth serve's packages share
// (serve, serve/e2bserve, serve/osbserve, serve/internal/core): the
// backends they run the server over (the fake provider, plain or with
// shared state, and the local provider with a bash "base"), a server of
// the test's handler on a real listener, HTTP calls and their answers,
// and the client side of both APIs (E2B create and envd, OpenSandbox
// lifecycle and execd streams). Main is the packages' TestMain: a
// goroutine-leak check and the local backend's leftovers.
//
// Only tests import it.
package servetest
