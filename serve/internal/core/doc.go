// Package core is what berth serve's two APIs share, one Server over one
// provider: the options (serve.Options is Options; the two APIs' own,
// OpenSandboxOptions and TemplateBuildOptions, are here too, so that the
// options are one flat struct validated at once), the API keys, the
// record of each sandbox either API made (Record) and the store that finds
// it by ID or access token, the per-key limits on sandboxes and resources
// (Reserve), the TTL timer that deletes each sandbox (Arm, Retime,
// Delete), the access tokens, the envd data plane and ports attached to
// each sandbox (AttachPlane, over package dataplane), the metrics, and the
// request log (Observe).
//
// Records live in the process's memory, or, on a stateless server
// (Options.Stateless), in the labels and TTL of the E2B API's sandboxes
// themselves (shared_store.go), so that replicas sharing the key file
// serve any sandbox; the OpenSandbox API's records stay in the process
// that made them.
//
// An API makes a record: it reserves the key's slot, has the provider
// create the sandbox, attaches the data plane, arms the timer and adds
// the record, which then holds the reservation until Delete; whatever
// fails on the way Abandons the sandbox. The APIs close before the Server,
// whose Close deletes what is left (unless KeepOnClose).
//
// Importers: packages serve, serve/e2bserve and serve/osbserve, and their
// tests (serve/internal/servetest).
package core
