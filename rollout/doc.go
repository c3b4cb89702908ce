// Package rollout runs agentic RL rollouts on Harbor tasks: a Harbor job
// (package job: the same sandboxes, phases, limits, retries and results
// layout) whose every trial talks to the policy through its own session on
// a session server (package session), which records the token ids the
// policy saw and produced. Per trial attempt it opens a session, runs the
// agent with the session's URL as its model endpoint, lets the verifier
// grade the sandbox, then collects the session's samples and deletes the
// session, whatever happened in between. The agent is terminus (on this
// host, driving the sandbox's shell) or command (a harness inside the
// sandbox, reaching its session through the reverse port, or through
// Config.ExternalURL on providers without one; a backend with neither is
// refused before any sandbox is made).
//
// Each trial directory gets, next to Harbor's files:
//
//	samples.safetensors  the session's samples in Miles's wire format
//	samples.jsonl        the same as JSON lines (results.SamplesFile), what
//	                     berth view shows: token texts, loss masks, turns,
//	                     the reward at the top level of each line
//
// and each sample's metadata carries what Miles's agent function returns
// (reward, exit_status, eval_report, agent_metrics) plus the session's
// tito_session_mismatch and the trial's name. exit_status is Submitted,
// TimeLimitExceeded, SequenceLengthLimitExceeded or AgentError. A trial
// that failed on infrastructure (a sandbox that went away, an engine or
// session server that kept failing, a cancel) is retried when its failure
// is transient and the job allows retries; otherwise its samples are
// marked ABORTED with metadata.abort_reason, and a trial whose session
// recorded nothing gets one empty ABORTED sample: no trial is dropped
// silently. A reply cut at the context makes the sample TRUNCATED.
//
// The job's rollout.json sums the samples up: statuses, exit statuses,
// mean reward, and the TITO mismatch rates (the share of samples whose
// session has at least one mismatch of a type) that Miles's CI gate
// checks (TRUNCATED samples are left out: a reply cut at the context
// lacks the end-of-turn token any rendering has). With Strict, a non-zero rate of special_token_count,
// special_token_type or non_assistant_text fails the run (ErrStrict),
// after everything is written.
//
// Who imports it: cmd/berth (berth rollout) and trainers written in Go.
package rollout
