// Package types holds the values shared by the sandbox API and its drivers:
// Spec, Command, Info, FileInfo, Capabilities and the error classes. It is a
// leaf so that package sandbox (which wraps drivers) and package
// sandbox/driver (which drivers implement) can both use it without a cycle.
//
// Callers should use the aliases in package sandbox; drivers import this
// package directly.
package types
