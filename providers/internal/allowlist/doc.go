// Package allowlist splits a Spec's network allowlist into what the
// cloud APIs take apart: CIDRs and domain names. The daytona and modal
// drivers use it; nothing else should.
package allowlist
