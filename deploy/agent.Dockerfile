# The agent image (BERTH_K8S_AGENT_IMAGE): nothing but the static berth
# binary at /berth, which each sandbox pod's initContainer copies into the
# pod (`berth k8s-agent --install`), or which an image volume mounts.
#   CGO_ENABLED=0 go build -o deploy/berth ./cmd/berth
#   docker build -f deploy/agent.Dockerfile -t REGISTRY/berth-agent:TAG deploy
FROM scratch
COPY berth /berth
ENTRYPOINT ["/berth"]
