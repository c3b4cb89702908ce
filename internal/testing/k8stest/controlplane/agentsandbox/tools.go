//go:build tools

// Package agentsandbox pins the controller build.sh builds; nothing imports it.
package agentsandbox

import _ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
