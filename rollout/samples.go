package rollout

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"time"

	"github.com/berth-sh/berth/harbor/trial"
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/session/samples"
)

// Exit statuses of an episode, as Miles names them.
const (
	Submitted                   = layout.ExitSubmitted
	TimeLimitExceeded           = layout.ExitTimeLimitExceeded
	SequenceLengthLimitExceeded = layout.ExitSequenceLengthLimitExceeded
	AgentError                  = layout.ExitAgentError
)

// SafetensorsFile holds a trial's samples in Miles's wire format.
const SafetensorsFile = "samples.safetensors"

// collectTimeout bounds collecting and deleting one session.
const collectTimeout = 2 * time.Minute

// outcome is how a trial ended, for its samples.
type outcome struct {
	exitStatus  string
	abortReason string // "" unless the samples are ABORTED
}

func outcomeOf(r *trial.Result) outcome {
	o := outcome{exitStatus: r.ExitStatus()}
	if o.exitStatus == layout.ExitCancelled {
		o.exitStatus = AgentError // not one of Miles' statuses; the samples say ABORTED
	}
	if e := r.ExceptionInfo; e != nil && (trial.Kind(e.ExceptionType).Infrastructure() || r.Retryable()) {
		o.abortReason = e.ExceptionMessage // "<type>: <message>"
	}
	return o
}

// samplesPayload is what the session gave (p is nil when collecting failed).
type samplesPayload struct {
	p       *samples.Payload
	session string
}

// sessionMeta is the part of a session's metadata the samples carry.
type sessionMeta struct {
	Mismatch       *json.RawMessage `json:"tito_session_mismatch"`
	MismatchCounts map[string]int   `json:"mismatch_counts"`
	MismatchError  string           `json:"mismatch_error"`
}

// sampleInfo is what every sample of a trial carries in its metadata:
// Miles's agent-function fields and the trial that produced it.
type sampleInfo struct {
	reward       float64
	outcome      outcome
	evalReport   any
	agentMetrics map[string]any
	trialName    string
	taskName     string
	attempt      int
}

// harborInfo is a Harbor trial's sampleInfo.
func harborInfo(r *trial.Result, o outcome) sampleInfo {
	return sampleInfo{reward: r.Reward(), outcome: o, evalReport: evalReport(r), agentMetrics: agentMetrics(r),
		trialName: r.TrialName, taskName: r.TaskName, attempt: r.Config.Attempt}
}

// writeSamples writes samples.safetensors and samples.jsonl into the trial
// directory, the trial's outcome in every sample's metadata.
func writeSamples(dir string, sp *samplesPayload, in sampleInfo, tokenText func(int) string) error {
	p := &samples.Payload{}
	sessionID := ""
	if sp != nil && sp.p != nil {
		p = sp.p
	}
	if sp != nil {
		sessionID = sp.session
	}
	var sm sessionMeta
	if len(p.SessionMetadata) > 0 {
		_ = json.Unmarshal(p.SessionMetadata, &sm)
	}
	o := in.outcome
	if len(p.Samples) == 0 {
		// Miles: a session without records is an ABORTED sample.
		if o.abortReason == "" {
			o.abortReason = "the session recorded no turns"
			if p.EmptyReason != "" {
				o.abortReason += " (" + p.EmptyReason + ")"
			}
		}
		p.Samples = []samples.Sample{{Tokens: []int{}, LossMask: []uint8{}, RolloutLogProbs: []float64{}}}
	}
	reward := in.reward
	meta := map[string]any{
		"reward":        reward,
		"exit_status":   o.exitStatus,
		"eval_report":   in.evalReport,
		"agent_metrics": in.agentMetrics,
		"trial_name":    in.trialName,
		"task_name":     in.taskName,
		"attempt":       in.attempt,
	}
	if sessionID != "" {
		meta["session_id"] = sessionID
	}
	if sm.Mismatch != nil {
		meta["tito_session_mismatch"] = sm.Mismatch
	}
	if sm.MismatchError != "" {
		meta["tito_mismatch_error"] = sm.MismatchError
	}
	if o.abortReason != "" {
		meta["abort_reason"] = o.abortReason
	}
	for i := range p.Samples {
		s := &p.Samples[i]
		if s.Metadata == nil {
			s.Metadata = map[string]any{}
		}
		for k, v := range meta {
			s.Metadata[k] = v
		}
		switch {
		case o.abortReason != "":
			s.Status = samples.Aborted
		case o.exitStatus == SequenceLengthLimitExceeded && s.Status == samples.Completed:
			s.Status = samples.Truncated
		case s.Status == "":
			s.Status = samples.Completed
		}
	}
	st, err := samples.EncodeSafetensors(p)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, SafetensorsFile), st, 0o644); err != nil {
		return err
	}
	var lines bytes.Buffer
	if err := samples.WriteJSONLines(&lines, p, samples.LineInfo{SessionID: sessionID, TokenText: tokenText, Counters: sm.MismatchCounts}); err != nil {
		return err
	}
	out, err := withReward(lines.Bytes(), reward)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, layout.SamplesFile), out, 0o644)
}

// withReward puts the reward at the top level of each line, where berth
// view reads it.
func withReward(lines []byte, reward float64) ([]byte, error) {
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	for _, l := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(l, &m); err != nil {
			return nil, err
		}
		m["reward"], _ = json.Marshal(reward)
		if err := enc.Encode(m); err != nil {
			return nil, err
		}
	}
	return out.Bytes(), nil
}

// evalReport is the verifier's verdict: its rewards and the trial's
// exception, if any.
func evalReport(r *trial.Result) map[string]any {
	rep := map[string]any{}
	if r.VerifierResult != nil {
		rep["rewards"] = r.VerifierResult.Rewards
	}
	if e := r.ExceptionInfo; e != nil {
		rep["exception_type"], rep["exception_message"] = e.ExceptionType, e.ExceptionMessage
	}
	if r.Verifier != nil {
		rep["verifier_seconds"] = r.Verifier.Duration().Seconds()
	}
	return rep
}

// agentMetrics are the agent's numbers from result.json.
func agentMetrics(r *trial.Result) map[string]any {
	m := map[string]any{}
	ar := r.AgentResult
	for k, v := range map[string]*int64{"n_input_tokens": ar.NInputTokens, "n_output_tokens": ar.NOutputTokens, "n_cache_tokens": ar.NCacheTokens} {
		if v != nil {
			m[k] = *v
		}
	}
	for k, v := range ar.Metadata {
		m[k] = v
	}
	if r.AgentExecution != nil {
		m["agent_seconds"] = r.AgentExecution.Duration().Seconds()
	}
	return m
}
