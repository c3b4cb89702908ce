package sandbox

import (
	"context"

	"github.com/berth-sh/berth/sandbox/driver"
)

// EnvdEndpoint is where a sandbox's own envd server answers.
type EnvdEndpoint = driver.EnvdEndpoint

// EnvdEndpoint returns the sandbox's envd server for drivers whose
// sandboxes run one (driver.EnvdServer); elsewhere it is NotSupported and
// callers use Exec and the file calls.
func (s *Sandbox) EnvdEndpoint(ctx context.Context) (EnvdEndpoint, error) {
	const op = "envd endpoint"
	end, err := s.begin(op)
	if err != nil {
		return EnvdEndpoint{}, err
	}
	defer end()
	es, ok := s.d.(driver.EnvdServer)
	if !ok {
		return EnvdEndpoint{}, s.wrap(Errorf(NotSupported, "the %s provider's sandboxes do not serve envd", s.p.name), op)
	}
	ep, err := es.EnvdEndpoint(ctx)
	return ep, s.wrap(err, op)
}
