// Package nodeshim is a test-only kubelet stand-in: it registers a Node
// with the test control plane, keeps its lease, and backs every pod the
// scheduler binds to it with a berth local sandbox (real runc containers),
// starting the pod's sandbox container command in it (berth's k8s agent)
// and reporting the pod Running, or Failed, through the API server. It
// serves the kubelet's port-forward endpoint, dialling the pod's port
// inside the sandbox's network namespace, as a kubelet does, and gives each
// pod a loopback IP of its own (127.1.x.y) where it relays the pod's port
// the same way. It enforces activeDeadlineSeconds and graceful deletion.
//
// What it does NOT prove: image pulls by a real kubelet (images come from
// the local provider's store: the busybox it seeds offline), CNI (pod IPs
// are host loopback addresses, reachable from the host only),
// NetworkPolicy enforcement, initContainers (the local provider mounts the
// berth binary at /.berth/berth itself, where the initContainer would have
// copied it), resource limits as the kubelet sets them, and exec/attach
// through the kubelet. The agent is not PID 1 there: the local provider's
// own agent is.
//
// Importers: tests of providers/k8s.
package nodeshim
