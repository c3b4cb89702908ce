package gymtest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/internal/testing/harbortest"
	"github.com/berth-sh/berth/internal/testing/hfref"
	"github.com/berth-sh/berth/serve"
	"github.com/berth-sh/berth/session"
	"github.com/berth-sh/berth/session/engine"
	"github.com/berth-sh/berth/session/testengine"
	"github.com/berth-sh/berth/session/tito"
)

const (
	serveKey  = "test_key_gym_serve_aaaaaaaaaaaaaaaa"
	policyKey = "test_key_gym_policy_bbbbbbbbbbbbbbb"
)

// answerPolicy writes answer to /tmp/answer on its first turn and submits
// on its second, as a mini-swe-agent policy would, in Qwen3's words (a
// think block, then the answer).
func answerPolicy(answer string) testengine.Script {
	return func(c testengine.Call) testengine.Reply {
		if c.N == 1 {
			return testengine.Reply{Text: "<think>\nThe task wants a file.\n</think>\n\nTHOUGHT: write the answer.\n\n```bash\necho " + answer + " > /tmp/answer && cat /tmp/answer\n```"}
		}
		return testengine.Reply{Text: "<think>\nIt is written.\n</think>\n\nTHOUGHT: done.\n\n```bash\necho " + SubmitMarker + "\n```"}
	}
}

// TestStandInAgainstBerth: the stand-in, driven by Gym's /run contract,
// calls policy_base_url/chat/completions (a session of berth's session
// server over the scripted test engine) and runs the answers through berth
// serve's OpenSandbox API (over the fake provider): the golden policy gets
// reward 1, a wrong one 0, and each session's sample holds both turns.
func TestStandInAgainstBerth(t *testing.T) {
	r := harbortest.Registry(t, nil) // skips without root or busybox
	p, err := r.Open(t.Context(), "fake", harbortest.Env(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	keys, _ := apikeys.New(serveKey)
	srv, err := serve.New(serve.Options{Provider: p, Keys: keys, BaseImage: "host", OpenSandbox: serve.OpenSandboxOptions{Images: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	sts := httptest.NewServer(srv)
	t.Cleanup(func() { sts.Close(); srv.Close() })

	codec, err := tito.LoadCodec(hfref.RequireQwen3(t), "qwen3", "")
	if err != nil {
		t.Fatal(err)
	}
	gym := httptest.NewServer(New(Options{OpenSandboxURL: sts.URL, APIKey: serveKey}))
	t.Cleanup(gym.Close)

	for _, c := range []struct {
		name   string
		answer string
		reward float64
	}{{"golden", "42", 1}, {"wrong", "41", 0}} {
		t.Run(c.name, func(t *testing.T) {
			te, err := testengine.New(codec.Tok, answerPolicy(c.answer), testengine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ets := httptest.NewServer(te)
			defer ets.Close()
			eng, err := engine.New(ets.URL, engine.SGLang, engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			skeys, _ := apikeys.New(policyKey)
			ss, err := session.New(session.Options{Engine: eng, Codec: codec, Keys: skeys})
			if err != nil {
				t.Fatal(err)
			}
			sst := httptest.NewServer(ss)
			defer func() { sst.Close(); ss.Close() }()
			client := &session.Client{BaseURL: sst.URL, APIKey: policyKey}
			id, err := client.Create(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			body, _ := json.Marshal(map[string]any{
				"instance_id":             "berth__answer-1",
				"problem_statement":       "Write 42 to /tmp/answer.",
				"responses_create_params": map[string]any{"input": []any{}, "temperature": 1.0},
				"policy_base_url":         client.PolicyBaseURL(id),
				"policy_api_key":          policyKey,
				"image":                   "host",
				"test_command":            `test "$(cat /tmp/answer)" = 42`,
			})
			res, err := http.Post(gym.URL+"/run", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var out RunResponse
			if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("/run: %d %v", res.StatusCode, err)
			}
			if out.Reward != c.reward || out.Metadata["resolved"] != (c.reward == 1) || out.Metadata["submitted"] != true || out.InstanceID != "berth__answer-1" {
				t.Fatalf("/run answered %+v", out)
			}
			payload, err := client.Samples(t.Context(), id, 0)
			if err != nil {
				t.Fatal(err)
			}
			// One sample per session, both policy turns in it: the model's
			// tokens under loss mask 1, the observation between them under 0.
			if len(payload.Samples) != 1 {
				t.Fatalf("%d samples, want the session's one", len(payload.Samples))
			}
			sm := payload.Samples[0]
			var ones, zeros int
			for _, m := range sm.LossMask {
				if m == 1 {
					ones++
				} else {
					zeros++
				}
			}
			if len(sm.LossMask) != sm.ResponseLength || ones == 0 || zeros == 0 ||
				!strings.Contains(sm.Response, "echo "+c.answer+" > /tmp/answer") || !strings.Contains(sm.Response, SubmitMarker) ||
				!strings.Contains(sm.Response, "<returncode>0</returncode>") {
				t.Fatalf("sample: response %q, mask %d ones %d zeros of %d", sm.Response, ones, zeros, sm.ResponseLength)
			}
			if err := client.Delete(t.Context(), id); err != nil {
				t.Fatal(err)
			}
			if infos, err := p.List(context.Background(), nil); err != nil || len(infos) != 0 {
				t.Fatalf("sandboxes left after /run: %+v %v", infos, err)
			}
		})
	}
	if res, err := http.Get(gym.URL + "/"); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %v", err)
	}
}

// TestMain fails the package when the servers leave goroutines behind (the
// tests' idle client connections aside).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("github.com/berth-sh/berth/internal/reap.Loop"))
}
