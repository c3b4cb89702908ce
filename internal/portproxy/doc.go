// Package portproxy carries connections to a sandbox's port and back:
// Join splices two connections together both ways (splice(2) between TCP
// and unix stream sockets, so the bytes never enter user space), and
// Listener is a loopback listener that hands each connection it accepts
// to a dial function (the local provider's agent channel, a Kubernetes
// port-forward) and joins the two. Endpoints keeps a sandbox handle's
// listeners, one per port and protocol.
//
// Importers: providers that expose ports through a channel of their own
// (providers/local, its agent in agent/localagent, providers/k8s)
// and tests.
package portproxy
