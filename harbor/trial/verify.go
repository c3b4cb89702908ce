package trial

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/harbor/task"
	"github.com/berth-sh/berth/results/layout"
	"github.com/berth-sh/berth/sandbox"
)

// maxRewardFile bounds what is read of a reward file: a flat map of numbers.
const maxRewardFile = 1 << 20

func (r *run) verify(ctx context.Context) error {
	rewards, err := Verify(ctx, r.sb, r.o.Task, r.verifierTimeout(), r.logf)
	r.download(ctx, agent.VerifierLogs, layout.VerifierDir)
	if err != nil {
		return err
	}
	r.res.VerifierResult = &layout.VerifierResult{Rewards: rewards}
	return nil
}

// Verify runs t's verifier in sb as a trial's verifier phase does: tests/
// uploaded to /tests, test.sh run in the task's working directory with its
// output in /logs/verifier/test-stdout.txt, then the rewards read from
// reward.json, else reward.txt (test.sh's exit code does not count). limit
// bounds the run (0: none); a passed limit is VerifierTimeout, and a
// missing, empty or malformed reward file is typed as Harbor types it.
// logf, when set, hears test.sh's exit code. Other connectors (the OpenEnv
// tbench2 environment) score with it so that a reward means the same thing
// everywhere.
func Verify(ctx context.Context, sb *sandbox.Sandbox, t *task.Task, limit time.Duration, logf func(string, ...any)) (map[string]float64, error) {
	err := timed(ctx, limit, VerifierTimeout, VerifierError, func(ctx context.Context) error {
		if err := sb.UploadDir(ctx, dirOf(t.TestScript), agent.TestsDir); err != nil {
			return err
		}
		err := agent.RunScript(ctx, agent.Env{Sandbox: sb, Task: t}, agent.TestsDir+"/test.sh",
			agent.VerifierLogs+"/test-stdout.txt", t.Config.Verifier.Env)
		var exit *agent.ExitError
		if errors.As(err, &exit) {
			// test.sh's exit code is ignored: only the reward file counts.
			if logf != nil {
				logf("verifier: test.sh exited %d", exit.Code)
			}
			return nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	// The verifier has finished: its reward is read even if the caller is
	// being cancelled right now, so the result is complete.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return readReward(rctx, sb)
}

// readReward reads reward.json (a flat map of numbers) and else reward.txt
// (one number, stored as {"reward": x}).
func readReward(ctx context.Context, sb *sandbox.Sandbox) (map[string]float64, error) {
	jsonPath, txtPath := agent.VerifierLogs+"/reward.json", agent.VerifierLogs+"/reward.txt"
	if b, err := readSmall(ctx, sb, jsonPath); err == nil {
		return parseRewardJSON(b)
	} else if !errors.Is(err, sandbox.ErrNotFound) {
		return nil, verifierErr(err)
	}
	b, err := readSmall(ctx, sb, txtPath)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil, fail(RewardFileNotFound, "neither %s nor %s exists", jsonPath, txtPath)
	}
	if err != nil {
		return nil, verifierErr(err)
	}
	return parseRewardText(b)
}

// readSmall reads a reward file. The limit is on what is read, not on
// what a stat said: the file is the sandbox's, and it can grow after the
// stat, or be a link to /dev/zero. A FIFO or device is refused before it
// is opened (a FIFO would hold the read until the timeout).
func readSmall(ctx context.Context, sb *sandbox.Sandbox, p string) ([]byte, error) {
	fi, err := sb.Stat(ctx, p)
	if err != nil {
		return nil, err
	}
	if fi.Type != sandbox.FileRegular && fi.Type != sandbox.FileSymlink {
		return nil, fail(VerifierOutputParse, "%s is not a regular file (type %s)", p, fi.Type)
	}
	rc, err := sb.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxRewardFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxRewardFile {
		return nil, fail(VerifierOutputParse, "%s is over %d bytes; a reward file is at most that (a flat map of numbers, or one number)", p, maxRewardFile)
	}
	return b, nil
}

// verifierErr types a failure to read a reward file: the trial's own
// verdicts stay as they are, anything else is the verifier's error.
func verifierErr(err error) error {
	var typed *Error
	if errors.As(err, &typed) {
		return err
	}
	return &Error{Kind: VerifierError, Err: err}
}

func parseRewardJSON(b []byte) (map[string]float64, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fail(RewardFileEmpty, "reward.json is empty")
	}
	var m map[string]float64
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fail(VerifierOutputParse, "reward.json is not a flat map of numbers: %v", err)
	}
	if len(m) == 0 {
		return nil, fail(RewardFileEmpty, "reward.json holds no rewards")
	}
	return m, nil
}

func parseRewardText(b []byte) (map[string]float64, error) {
	s := string(bytes.TrimSpace(b))
	if s == "" {
		return nil, fail(RewardFileEmpty, "reward.txt is empty")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fail(VerifierOutputParse, "reward.txt holds %q, not a number", truncate(s, 64))
	}
	return map[string]float64{"reward": v}, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
