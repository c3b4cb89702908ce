// Package apikeys holds the API keys `berth serve` accepts: read from a
// file of one key per line, generated on first start when the file is
// absent, and checked in constant time. Keys are identified in logs and
// metrics by a short hash, never by their value.
//
// Importers: package serve and cmd/berth.
package apikeys
