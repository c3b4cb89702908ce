#!/usr/bin/env bash
# Builds the test control plane (internal/testing/k8stest) from Go modules into
# $BERTH_K8S_BIN, default ~/.cache/berth-k8s/<versions>: etcd,
# kube-apiserver, kube-controller-manager and kube-scheduler from this
# module's pinned go.mod, kwok from its own (and, with
# BERTH_K8S_AGENT_SANDBOX=1, the agent-sandbox controller from its own).
# Nothing is committed; the Go build cache makes a rebuild cheap.
# A directory that already holds every binary is left as it is.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
versions="k8s-v1.37.2_etcd-v3.7.3_kwok-v0.8.0_as-v0.5.0" # = k8stest.Versions
out="${BERTH_K8S_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/berth-k8s/$versions}"
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
# The agent-sandbox controller (for the provider's agent-sandbox mode) only
# when asked: it costs about 5 CPU minutes cold.
as="${BERTH_K8S_AGENT_SANDBOX:-0}"
[[ $as == 1 ]] && bins+=(agent-sandbox-controller)
complete=1
for b in "${bins[@]}"; do [[ -x "$out/$b" ]] || complete=0; done
[[ -f "$out/kwok-stages.yaml" ]] || complete=0
[[ $as == 1 && ! -d "$out/agent-sandbox-crds" ]] && complete=0
if [[ $complete == 1 ]]; then
	echo "k8s control plane: up to date in $out"
	exit 0
fi
start=$SECONDS
tmp="$(mktemp -d "${out%/*}/.build-XXXXXX" 2>/dev/null || { mkdir -p "${out%/*}"; mktemp -d "${out%/*}/.build-XXXXXX"; })"
trap 'rm -rf "$tmp"' EXIT
# Stripped, static where it can be: smaller binaries link faster.
flags=(-trimpath -ldflags=-s\ -w)
export CGO_ENABLED=0
(cd "$here" && go build "${flags[@]}" -o "$tmp/" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler)
(cd "$here" && go build "${flags[@]}" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
(cd "$here/kwok" && go build "${flags[@]}" -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok)
if [[ $as == 1 ]]; then
	(cd "$here/agentsandbox" && go build "${flags[@]}" -o "$tmp/agent-sandbox-controller" sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller)
	# The CRDs the controller serves, from the same module version.
	crds="$(cd "$here/agentsandbox" && go list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)/k8s/crds"
	mkdir -p "$tmp/agent-sandbox-crds" && cp "$crds"/*.yaml "$tmp/agent-sandbox-crds/"
fi
# kwok's stages (node ready with a lease, pods ready, completed, deleted),
# from the same module version: kwok runs no stage it is not given.
stages="$(cd "$here/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage"
for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
	pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
	echo "---"
	cat "$stages/$f"
done >"$tmp/kwok-stages.yaml"
mkdir -p "$out"
if [[ $as == 1 ]]; then rm -rf "$out/agent-sandbox-crds" && mv "$tmp/agent-sandbox-crds" "$out/"; fi
mv -f "$tmp/kwok-stages.yaml" "$out/"
for b in "${bins[@]}"; do mv -f "$tmp/$b" "$out/$b"; done
echo "k8s control plane: built in $((SECONDS - start))s into $out"
