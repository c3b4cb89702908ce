# The agent image (BERTH_K8S_AGENT_IMAGE): nothing but the static agent
# binary (cmd/berth-agent, the sandbox's init without berth's CLI) at
# /berth, which each sandbox pod's initContainer copies into the pod
# (`/berth k8s-agent --install`), or which an image volume mounts.
#   CGO_ENABLED=0 go build -o deploy/berth ./cmd/berth-agent
#   docker build -f deploy/agent.Dockerfile -t REGISTRY/berth-agent:TAG deploy
FROM scratch
COPY berth /berth
ENTRYPOINT ["/berth"]
