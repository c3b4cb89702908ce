// Package e2b is the driver for servers that speak the E2B API: E2B Cloud,
// AgentENV and `berth serve` (shared/facts/e2b-protocol.md). The control
// plane is E2B's REST API (v2 routes first, v1 when a server lacks them);
// the data plane is envd, spoken by package envd's client.
//
// A Spec maps onto a create call: Image is the template (an id or alias,
// passed as is), Labels the metadata, Env the envVars, TTL the timeout,
// NetworkNone allow_internet_access=false. Resources are the template's to
// decide and are not sent. A created handle re-arms the TTL every TTL/6
// while it is open, so a sandbox outlives its TTL only while someone holds
// it; SetTimeout hands the deadline to the caller and stops the re-arming.
//
// Only the registry entry (package builtin) imports this package; callers
// reach the driver through the registry by name ("e2b", alias "agentenv").
package e2b
