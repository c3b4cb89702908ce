// Package heaptest measures how far the heap grows while a function runs,
// for the attack tests of the session server and of rollouts, which bound
// memory, never time.
//
// Who imports it: tests.
package heaptest
