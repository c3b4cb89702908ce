// Package envdproto holds the messages of E2B's envd process and filesystem
// services as plain Go structs whose encoding/json form is the protobuf JSON
// mapping (lowerCamelCase names, int64 as strings, bytes as base64, enums by
// name, unknown fields ignored), plus the Connect codec that carries them.
// No protoc and no generated code are involved.
//
// It is imported by package envd (the server and client of the protocol) and
// by anything that must speak the envd wire directly, such as `berth serve`.
// The wire itself is described in shared/facts/e2b-protocol.md.
package envdproto
