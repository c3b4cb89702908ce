package k8s

import (
	"context"
	"time"

	"github.com/berth-sh/berth/sandbox/types"
)

// agentSandbox is the agent-sandbox mode (BERTH_K8S_MODE=agent-sandbox).
type agentSandbox struct{ p *Provider }

func newAgentSandbox(p *Provider) (*agentSandbox, error) {
	return nil, types.Errorf(types.NotSupported, "k8s: agent-sandbox mode is not built yet")
}

func (a *agentSandbox) create(context.Context, types.Spec, []byte) (string, error) {
	return "", types.Errorf(types.NotSupported, "k8s: agent-sandbox mode is not built yet")
}

func (a *agentSandbox) setup(context.Context, *sandboxHandle, types.Spec) error { return nil }

func (a *agentSandbox) delete(context.Context, string) error {
	return types.Errorf(types.NotSupported, "k8s: agent-sandbox mode is not built yet")
}

func (a *agentSandbox) setExpiry(context.Context, string, time.Time, []byte) error {
	return types.Errorf(types.NotSupported, "k8s: agent-sandbox mode is not built yet")
}
