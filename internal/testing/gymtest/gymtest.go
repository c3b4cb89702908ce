// Package gymtest is a stand-in for NeMo Gym's mini_swe_agent_2 agent
// server, written for berth's tests from Gym's /run contract
// (responses_api_agents/mini_swe_agent_2/app.py): POST /run takes an
// instance with responses_create_params and policy_base_url, runs a
// mini-swe-agent style loop (the policy answers with one ```bash block a
// turn; the observation goes back as the next user message; echo
// COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT submits) in a sandbox it creates
// through berth serve's OpenSandbox API, as Gym's opensandbox provider
// does, then judges the instance and always answers 200 with reward and
// metadata. GET / is {"status":"ok"}; there is no health route.
//
// Where Gym runs the official SWE-bench harness, the stand-in runs the
// instance's test_command in the sandbox (exit 0 is resolved); the image
// comes from the instance's image field. Both fields are extensions of the
// stand-in (Gym allows extra fields). It is not a sandbox and not Gym: it
// is what berth's rollout tests drive.
//
// Import it from tests only.
package gymtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// SubmitMarker is what a command prints to end the episode, as in
// mini-swe-agent.
const SubmitMarker = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

// Options configure New.
type Options struct {
	// OpenSandboxURL is berth serve's base URL (its OPENSANDBOX_DOMAIN with
	// a scheme) and APIKey a key of it.
	OpenSandboxURL string
	APIKey         string
	// StepLimit bounds the policy's turns; 0 means 20.
	StepLimit int
	// StepTimeout bounds one command; 0 means 60 s.
	StepTimeout time.Duration
	// HTTP makes every call; nil means a client of its own.
	HTTP *http.Client
}

// Server is the stand-in agent server: an http.Handler.
type Server struct {
	opts Options
	osb  *osbClient
	mux  *http.ServeMux
}

// New returns the stand-in.
func New(o Options) *Server {
	if o.StepLimit <= 0 {
		o.StepLimit = 20
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = time.Minute
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{}
	}
	s := &Server{opts: o, osb: &osbClient{base: strings.TrimRight(o.OpenSandboxURL, "/"), key: o.APIKey, hc: o.HTTP}, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, map[string]string{"status": "ok"}) })
	s.mux.HandleFunc("POST /run", s.run)
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Message is a chat message of the trajectory.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// RunRequest is the body of POST /run: Miles's fields, the stand-in's two.
type RunRequest struct {
	InstanceID            string          `json:"instance_id"`
	ProblemStatement      string          `json:"problem_statement"`
	ResponsesCreateParams json.RawMessage `json:"responses_create_params"`
	PolicyBaseURL         string          `json:"policy_base_url"`
	PolicyAPIKey          string          `json:"policy_api_key"`
	Image                 string          `json:"image"`
	TestCommand           string          `json:"test_command"`
}

// createParams are the parts of responses_create_params the loop reads.
type createParams struct {
	Input           []Message `json:"input"`
	Temperature     *float64  `json:"temperature,omitempty"`
	TopP            *float64  `json:"top_p,omitempty"`
	MaxOutputTokens *int      `json:"max_output_tokens,omitempty"`
}

// RunResponse is the answer of /run (Gym's MiniSWEAgentVerifyResponse).
type RunResponse struct {
	ResponsesCreateParams map[string]any `json:"responses_create_params"`
	Response              map[string]any `json:"response"`
	Reward                float64        `json:"reward"`
	InstanceID            string         `json:"instance_id"`
	Metadata              map[string]any `json:"metadata"`
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// run answers 200 whatever happens: an error is metadata {error} and
// reward 0, as Gym's agent server answers.
func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	var req RunRequest
	var params createParams
	err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&req)
	if err == nil && len(req.ResponsesCreateParams) > 0 {
		err = json.Unmarshal(req.ResponsesCreateParams, &params)
	}
	raw := map[string]any{}
	if len(req.ResponsesCreateParams) > 0 {
		_ = json.Unmarshal(req.ResponsesCreateParams, &raw)
	}
	out := RunResponse{InstanceID: req.InstanceID, ResponsesCreateParams: raw, Response: map[string]any{"output": []Message{}}, Metadata: map[string]any{}}
	if err == nil {
		var msgs []Message
		var report map[string]any
		msgs, report, err = s.episode(r.Context(), req, params)
		if err == nil {
			out.Metadata = report
			if resolved, _ := report["resolved"].(bool); resolved {
				out.Reward = 1
			}
		}
		raw["input"] = msgs
		out.Response["output"] = msgs
	}
	if err != nil {
		out.Metadata = map[string]any{"error": err.Error(), "traceback": ""}
	}
	writeJSON(w, out)
}

var bashBlock = regexp.MustCompile("(?s)```bash\\s*\\n(.*?)```")

// episode is the agent loop in one sandbox: the policy's commands run
// until it submits or the step limit, then the instance is judged.
func (s *Server) episode(ctx context.Context, req RunRequest, p createParams) ([]Message, map[string]any, error) {
	if req.PolicyBaseURL == "" || req.Image == "" || req.TestCommand == "" {
		return nil, nil, fmt.Errorf("policy_base_url, image and test_command are required")
	}
	msgs := append([]Message(nil), p.Input...)
	if len(msgs) == 0 {
		msgs = []Message{
			{Role: "system", Content: "You are a helpful assistant that can interact with a computer. Reply with one ```bash block a turn; print " + SubmitMarker + " when done."},
			{Role: "user", Content: req.ProblemStatement},
		}
	}
	sb, err := s.osb.create(ctx, req.Image, 30*time.Minute, map[string]string{"gym-instance": req.InstanceID})
	if err != nil {
		return msgs, nil, fmt.Errorf("creating the sandbox: %w", err)
	}
	defer s.osb.delete(context.WithoutCancel(ctx), sb.id)
	steps, submitted := 0, false
	for ; steps < s.opts.StepLimit && !submitted; steps++ {
		answer, err := s.chat(ctx, req, p, msgs)
		if err != nil {
			return msgs, nil, err
		}
		msgs = append(msgs, Message{Role: "assistant", Content: answer})
		m := bashBlock.FindStringSubmatch(answer)
		if m == nil {
			msgs = append(msgs, Message{Role: "user", Content: "Format error: reply with exactly one ```bash block."})
			continue
		}
		output, code, err := s.osb.run(ctx, sb, m[1], s.opts.StepTimeout)
		if err != nil {
			return msgs, nil, fmt.Errorf("running a step: %w", err)
		}
		if strings.Contains(output, SubmitMarker) {
			submitted = true
			continue
		}
		msgs = append(msgs, Message{Role: "user", Content: fmt.Sprintf("<returncode>%d</returncode>\n<output>\n%s\n</output>", code, output)})
	}
	testOut, testCode, err := s.osb.run(ctx, sb, req.TestCommand, s.opts.StepTimeout)
	if err != nil {
		return msgs, nil, fmt.Errorf("judging: %w", err)
	}
	return msgs, map[string]any{"resolved": testCode == 0, "test_exit_code": testCode, "test_output": testOut,
		"steps": steps, "submitted": submitted, "instance_id": req.InstanceID}, nil
}

// chat is one policy call: POST {policy_base_url}/chat/completions,
// non-streaming, with the Bearer key, policy_base_url used verbatim.
func (s *Server) chat(ctx context.Context, req RunRequest, p createParams, msgs []Message) (string, error) {
	body := map[string]any{"model": "policy", "messages": msgs}
	if p.Temperature != nil {
		body["temperature"] = *p.Temperature
	}
	if p.TopP != nil {
		body["top_p"] = *p.TopP
	}
	if p.MaxOutputTokens != nil {
		body["max_tokens"] = *p.MaxOutputTokens
	}
	b, _ := json.Marshal(body)
	hreq, err := http.NewRequestWithContext(ctx, "POST", req.PolicyBaseURL+"/chat/completions", strings.NewReader(string(b)))
	if err != nil {
		return "", err
	}
	key := req.PolicyAPIKey
	if key == "" {
		key = "dummy_key" // as Gym sends without one
	}
	hreq.Header.Set("Authorization", "Bearer "+key)
	hreq.Header.Set("Content-Type", "application/json")
	res, err := s.opts.HTTP.Do(hreq)
	if err != nil {
		return "", fmt.Errorf("policy: %w", err)
	}
	defer res.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil || res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("policy: %d %s %v", res.StatusCode, rb, err)
	}
	var reply struct {
		Choices []struct {
			Message Message `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(rb, &reply); err != nil || len(reply.Choices) == 0 {
		return "", fmt.Errorf("policy: a reply without choices: %s", rb)
	}
	return reply.Choices[0].Message.Content, nil
}
