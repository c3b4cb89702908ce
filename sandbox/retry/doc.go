// Package retry is berth's one retry helper: Do and Value call an
// operation again while its error's class says that may help
// (errdefs.Retryable: Unavailable or ResourceExhausted, never Permanent),
// after the wait the server advised (errdefs.RetryAfterOf) or a jittered
// exponential backoff with a cap (Backoff), within a bound on attempts
// and/or on time, and never past the caller's ctx (Sleep). What differs
// between callers (how many attempts, the backoff's first wait and cap,
// which failures are worth another try) is a Policy, not another loop.
//
// Its users: sandbox/throttle (Gate.Create's retries of a throttled or
// transient create), providers/internal/rest (Client.Send, the REST
// drivers' calls), harbor/job (a trial's retries), openenv (Client, a
// fresh session's first message while the server is at capacity) and
// rollout (a NeMo Gym /run); Sleep is the ctx-aware wait of those loops and
// of providers/daytona's polls, harbor/trial's health checks and
// harbor/agent/shellsession.
//
// It imports only sandbox/errdefs and the standard library, so that
// drivers may import it: it sits at sandbox/driver's level, below the user
// API.
package retry
