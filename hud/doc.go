// Package hud speaks HUD's environment protocol, both sides: the control
// channel (newline-delimited JSON-RPC 2.0 over raw TCP: hello with session
// resume, tasks.list, tasks.start, tasks.grade, tasks.cancel, bye, and the
// client's hello heartbeat) and capability tunnels (a connection whose first
// frame is tunnel.open becomes a raw byte stream to one capability).
//
// The frames, ids, error codes and messages follow hud-python's
// hud/clients/client.py and hud/environment/server.py. Two things differ on
// purpose, because a hosted berth server is shared by clients that do not
// trust each other: session ids are 128 random bits (they are the resume
// token), and a tasks.grade on a connection with no task never adopts
// another connection's parked task.
//
// A Server bounds what a peer can make it hold: frames are at most
// Limits.MaxFrame bytes, the first frame and every frame once begun must
// arrive within their deadlines, an idle control connection that sends
// nothing (not even its heartbeat hello) for the heartbeat window is cut
// off and its session ended, and a parked session (its connection dropped
// without bye) is ended when the window passes without a resuming hello.
//
// The Server is generic over an Env (what tasks exist, what a session does,
// where a tunnel goes); package hud/hudserve is the one that serves Harbor
// tasks from sandboxes. The Client is what berth's smoke runner, the tests
// and `berth hud up`'s readiness loop use.
package hud
