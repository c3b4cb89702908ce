// Package selfdriver is the machine this process runs on, seen through the
// sandbox API: Exec starts local processes and the file calls touch local
// paths. It is for a server that already runs inside a sandbox, so that
// code written against the sandbox API (the tbench2 OpenEnv environment)
// drives the sandbox it lives in: `berth-agent openenv` serves with it.
//
// Create makes no sandbox: it returns a handle on this machine whose
// commands run in the Spec's working directory, as its user, with its
// environment added. The Spec's image, resources, network and TTL are the
// enclosing sandbox's business, which the launcher set up (see package
// openenv/insandbox); they are accepted and not applied. Delete ends the
// processes the handle started and leaves the machine.
//
// Processes and files go through the envd protocol's own server
// (envd.NewServer) on a unix socket in a private directory, with a random
// access token, so they behave exactly as a local sandbox's do.
//
// It is never in the registry: on a host it would be no sandbox at all.
// Import it only from in-sandbox servers.
package selfdriver
