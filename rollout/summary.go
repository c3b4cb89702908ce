package rollout

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/berth-sh/berth/results"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/session/tito"
)

// GatedMismatches are the mismatch types Miles's CI gate requires to be 0
// (assistant_text is expected drift: the model's own tokens).
var GatedMismatches = []string{tito.SpecialTokenCount, tito.SpecialTokenType, tito.NonAssistantText}

// Summary sums up a rollout's samples (rollout.json).
type Summary struct {
	Trials       int            `json:"trials"`
	Samples      int            `json:"samples"`
	Statuses     map[string]int `json:"statuses"`
	ExitStatuses map[string]int `json:"exit_statuses"`
	MeanReward   float64        `json:"mean_reward"`
	// MismatchRates are, per type, the share of samples checked whose
	// session has at least one mismatch of the type (Miles's
	// tito_session_mismatch_rate/<type>); Checked counts the samples that
	// carry tito_session_mismatch.
	MismatchRates map[string]float64 `json:"tito_session_mismatch_rate"`
	// TRUNCATED samples count too: the session server compares a session
	// whose last reply was cut with that turn closed, as the next turn
	// would close it (tito.Codec.SessionMismatch).
	Checked int       `json:"tito_checked_samples"`
	Aborted []Aborted `json:"aborted,omitempty"`
	// StrictFailures say why the strict gate failed (empty when it passed
	// or was not asked for).
	StrictFailures []string `json:"strict_failures,omitempty"`
	// Stopped says why the rollout ended before its last trial (max
	// samples reached).
	Stopped string `json:"stopped,omitempty"`
	Dir     string `json:"dir"`
}

// Aborted is a trial whose samples were marked ABORTED, and why.
type Aborted struct {
	Trial  string `json:"trial"`
	Reason string `json:"reason"`
}

// line is what the summary reads of a samples.jsonl line.
type line struct {
	Status   string  `json:"status"`
	Reward   float64 `json:"reward"`
	Metadata struct {
		ExitStatus  string          `json:"exit_status"`
		AbortReason string          `json:"abort_reason"`
		Mismatch    json.RawMessage `json:"tito_session_mismatch"`
	} `json:"metadata"`
}

// summarize reads the samples of every trial directory of the job.
func summarize(jobDir string, strict bool) (*Summary, error) {
	s := &Summary{Statuses: map[string]int{}, ExitStatuses: map[string]int{}, MismatchRates: map[string]float64{}, Dir: jobDir}
	dirs, err := filepath.Glob(filepath.Join(jobDir, "*", layout.SamplesFile))
	if err != nil {
		return nil, err
	}
	sort.Strings(dirs)
	withType := map[string]int{}
	rewardSum := 0.0
	for _, p := range dirs {
		lines, err := readLines(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		s.Trials++
		trialName := filepath.Base(filepath.Dir(p))
		for i, l := range lines {
			s.Samples++
			s.Statuses[l.Status]++
			s.ExitStatuses[l.Metadata.ExitStatus]++
			rewardSum += l.Reward
			if l.Metadata.AbortReason != "" && i == 0 {
				s.Aborted = append(s.Aborted, Aborted{Trial: trialName, Reason: l.Metadata.AbortReason})
			}
			if len(l.Metadata.Mismatch) == 0 || string(l.Metadata.Mismatch) == "null" {
				continue
			}
			var ms []tito.Mismatch
			if err := json.Unmarshal(l.Metadata.Mismatch, &ms); err != nil {
				return nil, fmt.Errorf("%s: tito_session_mismatch: %w", p, err)
			}
			s.Checked++
			seen := map[string]bool{}
			for _, m := range ms {
				if !seen[m.Type] {
					seen[m.Type] = true
					withType[m.Type]++
				}
			}
		}
	}
	if s.Samples > 0 {
		s.MeanReward = rewardSum / float64(s.Samples)
	}
	for _, t := range tito.MismatchTypes {
		if s.Checked > 0 {
			s.MismatchRates[t] = float64(withType[t]) / float64(s.Checked)
		}
	}
	if strict {
		for _, t := range GatedMismatches {
			if r := s.MismatchRates[t]; r != 0 {
				s.StrictFailures = append(s.StrictFailures, fmt.Sprintf("tito_session_mismatch_rate/%s=%.4f must be 0", t, r))
			}
		}
	}
	return s, nil
}

func readLines(p string) ([]line, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []line
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), results.MaxSampleLine)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// Print writes the summary for a person.
func (s *Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "samples: %d from %d trials, mean reward %.3f\n", s.Samples, s.Trials, s.MeanReward)
	fmt.Fprintf(w, "status: %s\n", counts(s.Statuses))
	fmt.Fprintf(w, "exit status: %s\n", counts(s.ExitStatuses))
	if s.Checked > 0 {
		var parts []string
		for _, t := range tito.MismatchTypes {
			parts = append(parts, fmt.Sprintf("%s %.4f", t, s.MismatchRates[t]))
		}
		fmt.Fprintf(w, "tito mismatch rate (%d samples): %s\n", s.Checked, strings.Join(parts, ", "))
	}
	for _, a := range s.Aborted {
		fmt.Fprintf(w, "aborted %s: %s\n", a.Trial, a.Reason)
	}
	for _, f := range s.StrictFailures {
		fmt.Fprintf(w, "strict gate: %s\n", f)
	}
	if s.Stopped != "" {
		fmt.Fprintf(w, "stopped: %s\n", s.Stopped)
	}
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
