package rollout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth/results/layout"
)

// The strict gate reads the samples as written: a gated mismatch in one
// session fails it, TRUNCATED samples included; assistant_text drift does
// not.
func TestStrictGate(t *testing.T) {
	write := func(dir, trial, line string) {
		p := filepath.Join(dir, trial, layout.SamplesFile)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	clean := `{"tokens":[1],"loss_mask":[1],"rollout_log_probs":[0],"status":"COMPLETED","reward":1,"metadata":{"exit_status":"Submitted","tito_session_mismatch":[{"type":"assistant_text"}]}}`
	bad := `{"tokens":[1],"loss_mask":[1],"rollout_log_probs":[0],"status":"COMPLETED","reward":0,"metadata":{"exit_status":"Submitted","tito_session_mismatch":[{"type":"special_token_type"},{"type":"special_token_type"}]}}`
	cut := `{"tokens":[1],"loss_mask":[1],"rollout_log_probs":[0],"status":"TRUNCATED","reward":0,"metadata":{"exit_status":"SequenceLengthLimitExceeded","tito_session_mismatch":[]}}`
	badCut := `{"tokens":[1],"loss_mask":[1],"rollout_log_probs":[0],"status":"TRUNCATED","reward":0,"metadata":{"exit_status":"SequenceLengthLimitExceeded","tito_session_mismatch":[{"type":"special_token_count"}]}}`
	aborted := `{"tokens":[],"loss_mask":[],"rollout_log_probs":[],"status":"ABORTED","reward":0,"metadata":{"exit_status":"AgentError","abort_reason":"EnvironmentError: gone"}}`

	dir := t.TempDir()
	write(dir, "a__1", clean)
	write(dir, "b__2", cut)
	write(dir, "c__3", aborted)
	s, err := summarize(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.StrictFailures) != 0 || s.Checked != 2 || s.MismatchRates["assistant_text"] != 0.5 || s.Samples != 3 || len(s.Aborted) != 1 {
		t.Fatalf("clean run: %+v", s)
	}

	write(dir, "d__4", bad)
	s, err = summarize(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if s.MismatchRates["special_token_type"] != 1.0/3 || len(s.StrictFailures) != 1 || !strings.Contains(s.StrictFailures[0], "special_token_type=0.3333") {
		t.Fatalf("gated mismatch: %+v", s)
	}
	if s, _ := summarize(dir, false); len(s.StrictFailures) != 0 {
		t.Fatal("the gate failed without strict")
	}
	var b strings.Builder
	s.Print(&b)
	for _, want := range []string{"samples: 4 from 4 trials", "ABORTED 1", "SequenceLengthLimitExceeded 1", "special_token_type 0.3333", "aborted c__3: EnvironmentError: gone"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("summary lacks %q:\n%s", want, b.String())
		}
	}

	// A truncated sample's session is checked like any other.
	write(dir, "e__5", badCut)
	if s, _ := summarize(dir, true); s.MismatchRates["special_token_count"] != 0.25 || len(s.StrictFailures) != 2 {
		t.Fatalf("a gated mismatch of a truncated sample: %+v", s)
	}
}
