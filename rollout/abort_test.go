package rollout_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth/rollout"
	"github.com/berth-sh/berth/rollout/policy"
	"github.com/berth-sh/berth/rollout/rollouttest"
	"github.com/berth-sh/berth/session/testengine"
)

// slow is a policy that keeps its sandbox busy: every turn sleeps.
func slow(testengine.Call) testengine.Reply {
	return testengine.Reply{Text: policy.Answer("Waiting.", []string{"sleep 30\n"}, 60, false)}
}

// TestMaxSamplesStopsTheRollout: with MaxSamples 2, the rollout ends once
// the two csv-total trials (the first to start, golden and quick) have
// their samples: the trials still running (pack-project, asleep in their
// sandboxes) are cancelled, their sandboxes torn down, their samples
// ABORTED with the reason, the rest never start, and the rollout is not
// an error.
func TestMaxSamplesStopsTheRollout(t *testing.T) {
	f := newFakeRun(t, func(tasks string) testengine.Script {
		g := rollouttest.Golden(t, tasks)
		return func(c testengine.Call) testengine.Reply {
			if strings.Contains(string(c.Body["messages"]), "/app/total.sh") {
				return g(c)
			}
			return slow(c)
		}
	})
	start := time.Now()
	res, err := f.run(t.Context(), t, func(c *rollout.Config) { c.MaxSamples, c.Strict = 2, false })
	if err != nil {
		t.Fatalf("a rollout stopped at max samples: %v", err)
	}
	if time.Since(start) > 40*time.Second {
		t.Fatalf("the stop took %v", time.Since(start))
	}
	f.leftovers(t)
	rs := res.Rollout
	if !strings.Contains(rs.Stopped, "max samples reached: 2 samples of 2") || rs.Statuses["COMPLETED"] != 2 || rs.Statuses["ABORTED"] == 0 ||
		rs.Statuses["ABORTED"]+2 != rs.Samples || rs.Samples >= 6 {
		t.Fatalf("summary %+v", rs)
	}
	for _, d := range f.dirs(t) {
		s := rollouttest.ReadSamples(t, d)[0]
		r := rollouttest.TrialResult(t, d)
		switch {
		case strings.Contains(d, "csv-total"):
			if s.Status != "COMPLETED" || r.Reward() != 1 {
				t.Errorf("%s: %s reward %v", d, s.Status, r.Reward())
			}
		case s.Status != "ABORTED" || s.Metadata.AbortReason != "CancelledError: max samples reached: 2 samples of 2 collected" || r.VerifierResult != nil:
			t.Errorf("%s: %s %q (verified: %v)", d, s.Status, s.Metadata.AbortReason, r.VerifierResult != nil)
		}
	}
}

// TestSessionAbortStopsTheTrials is a trainer's abort hook during a
// rollout: every trial is in the middle of an engine call when the
// trainer aborts all sessions on the session server. Each engine call is
// cancelled, no trial goes on (no further engine calls, no verifier), the
// sandboxes are torn down, and the samples are ABORTED with the trainer's
// reason.
func TestSessionAbortStopsTheTrials(t *testing.T) {
	var blocked, cancelled atomic.Int32
	var mu sync.Mutex
	calls := map[string]int{}
	f := newFakeRun(t, func(string) testengine.Script {
		return func(c testengine.Call) testengine.Reply {
			mu.Lock()
			calls[c.RoutingKey]++
			mu.Unlock()
			if c.N == 1 {
				return testengine.Reply{Text: policy.Answer("Looking.", []string{"ls /\n"}, 1, false)}
			}
			blocked.Add(1)
			select {
			case <-c.Ctx.Done():
				cancelled.Add(1)
			case <-time.After(60 * time.Second):
			}
			return slow(c)
		}
	})
	go func() {
		for blocked.Load() < int32(3*rollouttest.SamplesPerTask) {
			time.Sleep(10 * time.Millisecond)
		}
		n, err := f.pe.Client.AbortAll(t.Context(), "rollout step done")
		if err != nil || n != 3*rollouttest.SamplesPerTask {
			t.Errorf("AbortAll: %d %v", n, err)
		}
	}()
	res, err := f.run(t.Context(), t, func(c *rollout.Config) { c.Job.NConcurrent, c.Strict = 3*rollouttest.SamplesPerTask, false })
	if err != nil {
		t.Fatal(err)
	}
	f.leftovers(t)
	if cancelled.Load() != 3*int32(rollouttest.SamplesPerTask) {
		t.Errorf("%d of the in-flight engine calls were cancelled", cancelled.Load())
	}
	for k, n := range calls {
		if n != 2 {
			t.Errorf("session %s: %d engine calls after the abort", k, n)
		}
	}
	if res.Rollout.Statuses["ABORTED"] != 3*rollouttest.SamplesPerTask {
		t.Fatalf("summary %+v", res.Rollout)
	}
	for _, d := range f.dirs(t) {
		s := rollouttest.ReadSamples(t, d)[0]
		r := rollouttest.TrialResult(t, d)
		if s.Status != "ABORTED" || s.Metadata.AbortReason != "CancelledError: session aborted: rollout step done" || r.VerifierResult != nil {
			t.Errorf("%s: %s %q (verified: %v)", d, s.Status, s.Metadata.AbortReason, r.VerifierResult != nil)
		}
	}
}
