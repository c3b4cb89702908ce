// Package e2bapi holds the JSON messages of E2B's control plane (the REST
// API of e2b-dev/infra spec/openapi.yml) as plain Go structs named after
// the spec's schemas, with the spec's field names, plus the routes,
// headers and defaults of that API: what berth speaks of it and no more.
// Fields berth neither sends nor reads are left out (unknown fields are
// ignored when decoding, as the SDKs do).
//
// It is imported by providers/e2b (the driver, a client of the API) and by
// serve/e2bserve (berth serve's server of it). It lives beside envd, whose
// envdproto is the same for the data plane, rather than under either user:
// under providers/ the server would import a provider's tree (servers
// reach providers only through the registry), under serve/ a driver would
// import a server's (a provider imports nothing above it). Both sides
// decode what the other encodes through these types, so a field name
// wrong here would pass their own tests: the official JS SDK's tests of
// berth serve (serve/testdata/sdk) are the independent check of the wire.
// The wire is described in shared/facts/e2b-protocol.md.
package e2bapi
