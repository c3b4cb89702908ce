// Package agent is the tree of everything berth runs inside a sandbox (not
// to be confused with harbor/agent, the agent under test). The binary is
// cmd/berth-agent (also the berth binary's hidden verbs); its parts:
//
//   - agent/pid1: PID 1 duties every berth agent shares: non-dumpable,
//     serving on the host's socket, reaping orphans, exiting at the
//     sandbox's deadline, dropping the signals the sandbox sends it;
//   - agent/localagent: the local provider's agent (the envd server, the
//     tree routes, the configuration the provider hands it);
//   - agent/podagent: the Kubernetes provider's agent (envd on TCP, the
//     token's hash in the pod spec, warm-pool claims);
//   - agent/selfdriver: the sandbox API over the machine the process runs
//     on, for servers that already run inside a sandbox (`berth-agent
//     openenv`).
//
// The envd protocol both agents serve is package envd; the host-process
// engine they start commands with is internal/hostproc.
package agent
