// Command berth is the command-line front end of berth: one file per verb,
// each parsing its flags and making one library call.
//
//	berth providers [--json]       what is registered, credential status, capabilities
//	berth env --backend NAME       the environment a worker needs (never a secret)
//	berth doctor [--backend NAME]  credential, host pieces and endpoint checks
//	berth version                  build version, Go version, os/arch
//
// The providers the binary ships are registered in one place, main.go, by
// package builtin. Nothing imports this package.
//
// Exit codes: 0 success, 1 failure, 2 a usage error or a missing or refused
// credential. Errors go to stderr as "berth: <message>".
package main
