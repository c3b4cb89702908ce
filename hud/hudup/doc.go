// Package hudup runs a HUD environment image's own server in a sandbox of
// any provider and hands back the tcp:// runtime URL that HUD's client
// attaches to (hud.Runtime("tcp://..."), hud eval --runtime tcp://...):
// `berth hud up`. It is the layout Miles uses on Daytona (the env's
// `hud serve env.py --host 0.0.0.0 --port 8765` started as a background
// command, its control port reached from outside), made available on
// every provider whose Endpoint carries raw TCP (Capabilities.Ports lists
// tcp: local, modal).
//
// Up creates the sandbox with the port declared as tcp, starts the
// command, and waits until the control channel answers hello through the
// port's Endpoint, as HUD's own readiness loop does; a server that exits
// first fails Up with its exit code and the tail of its output, and the
// sandbox is deleted. Run then keeps the sandbox alive (its provider-side
// deadline re-armed ahead of the TTL) until its context ends or the server
// exits; Delete removes it.
//
// Importers: cmd/berth (`berth hud up`) and its tests.
package hudup
