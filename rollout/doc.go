// Package rollout runs agentic RL rollouts on Harbor tasks: a Harbor job
// (package job: the same sandboxes, phases, limits, retries and results
// layout) whose every trial talks to the policy through its own session on
// a session server (package session), which records the token ids the
// policy saw and produced. Per trial attempt it opens a session, runs the
// agent with the session's URL as its model endpoint, lets the verifier
// grade the sandbox, then collects the session's samples and deletes the
// session, whatever happened in between. The caller gives the agent
// (Config.Agent, a rollout.Agent that makes each trial's agent for its
// session); package rollout/agents has berth's two: terminus (on this
// host, driving the sandbox's shell) and command (a harness inside the
// sandbox, reaching its session through the reverse port, or through an
// external URL on providers without one; a backend with neither is
// refused before any sandbox is made).
//
// Each trial directory gets, next to Harbor's files:
//
//	samples.safetensors  the session's samples in Miles's wire format
//	samples.jsonl        the same as JSON lines (layout.SamplesFile), what
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
// A rollout stops early on Ctrl-C (its context), at Config.MaxSamples
// samples that are not ABORTED (Miles's oversampling abort; Run returns no
// error then, rollout.json says "stopped"), or, trial by trial, when a
// trainer aborts the trial's session on the session server (Miles's agent
// abort hook: POST /abort, or /flush with its session_server_instance_id).
// Each trial runs under a context of its own (job.TrialContexter) that a
// watcher of its session ends at the abort; whatever ends it, the session
// is aborted at once (the in-flight turn's engine call is cancelled, its
// commit skipped), the agent and the verifier stop, the sandbox is torn
// down, and the samples are ABORTED with abort_reason "CancelledError:
// <cause>" (abort.go).
//
// The job's rollout.json sums the samples up: statuses, exit statuses,
// mean reward, and the TITO mismatch rates (the share of samples whose
// session has at least one mismatch of a type) that Miles's CI gate
// checks, TRUNCATED samples included (the session server closes a cut
// reply as the next turn would). With Strict, a non-zero rate of special_token_count,
// special_token_type or non_assistant_text fails the run (ErrStrict),
// after everything is written.
//
// # NeMo Gym
//
// RunGym is the same rollout through a NeMo Gym agent server
// (mini_swe_agent_2), which runs the harness and creates its sandboxes
// itself (through berth serve's OpenSandbox API, or any provider of its
// own). The tasks are a JSON lines file of instances (SWE-bench fields, or
// Miles's {"prompt", "metadata"} lines). Per sample it opens a session and
// sends one POST {URL}/run, as Miles's NeMo Gym agent function does: the
// instance's fields as they are, responses_create_params with the
// rollout's sampling settings (temperature, top_p, max_output_tokens; input
// [] unless the task has one), policy_base_url (the session's /v1 URL as
// the Gym host reaches it, GymOptions.PolicyURL) and policy_api_key (the
// session server's key, when it has one). Gym's reward and metadata become
// the sample's reward and eval_report; an answer whose metadata holds an
// error is a failed episode with reward 0, its samples kept. Transport
// errors and 5xx answers are tried again (3 attempts, 1-5 s apart, each
// with a fresh session: Gym may still be running the episode it gave up);
// other answers are not. A sample gets SampleTimeout in all (1 h). A sample
// with no answer is ABORTED with the reason (exception NeMoGymError,
// AgentTimeoutError or CancelledError); its session's samples are still
// collected, and the session is deleted whatever happened. The answer is
// read up to MaxReplyBytes and kept as gym_response.json. Each sample gets
// a trial directory (config.json, result.json, trial.log, the samples) in
// a job directory the viewer reads; rollout.json and the strict gate are
// the same.
//
// Who imports it: cmd/berth (berth rollout) and trainers written in Go.
package rollout
