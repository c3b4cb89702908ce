// Package httpserve runs berth's HTTP servers (berth serve, the session
// server, OpenEnv, the viewer, the agents) one way: header and idle limits
// a slow or idle client cannot stretch, a new connection that waits for
// its first byte as long as an idle one may (Listener), and a stop on the
// context's end that lets open calls finish for a grace period before it
// closes what is left.
package httpserve
