// Package apikeys holds the API keys berth's servers accept (berth serve,
// the session server, berth openenv serve): read from a file of one key
// per line, generated on first start when the file is absent, and checked
// in constant time. Keys are identified in logs and metrics by a short
// hash, never by their value.
//
// It sits below every server so that none imports another for its keys.
// Importers: packages serve and session, cmd/berth, and the tests that
// start those servers.
package apikeys
