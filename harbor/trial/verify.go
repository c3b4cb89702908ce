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
	"github.com/berth-sh/berth/sandbox"
)

// maxRewardFile bounds what is read of a reward file: a flat map of numbers.
const maxRewardFile = 1 << 20

func (r *run) verify(ctx context.Context) error {
	t := r.o.Task
	err := r.timed(ctx, r.verifierTimeout(), VerifierTimeout, VerifierError, func(ctx context.Context) error {
		if err := r.sb.UploadDir(ctx, dirOf(t.TestScript), agent.TestsDir); err != nil {
			return err
		}
		err := agent.RunScript(ctx, agent.Env{Sandbox: r.sb, Task: t}, agent.TestsDir+"/test.sh",
			agent.VerifierLogs+"/test-stdout.txt", t.Config.Verifier.Env)
		var exit *agent.ExitError
		if errors.As(err, &exit) {
			// test.sh's exit code is ignored: only the reward file counts.
			r.logf("verifier: test.sh exited %d", exit.Code)
			return nil
		}
		return err
	})
	r.download(ctx, agent.VerifierLogs, "verifier")
	if err != nil {
		return err
	}
	// The verifier has finished: its reward is read even if the job is
	// being cancelled right now, so the trial's result is complete.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	rewards, err := r.readReward(rctx)
	if err != nil {
		return err
	}
	r.res.VerifierResult = &VerifierResult{Rewards: rewards}
	return nil
}

// readReward reads reward.json (a flat map of numbers) and else reward.txt
// (one number, stored as {"reward": x}).
func (r *run) readReward(ctx context.Context) (map[string]float64, error) {
	jsonPath, txtPath := agent.VerifierLogs+"/reward.json", agent.VerifierLogs+"/reward.txt"
	if b, err := r.readSmall(ctx, jsonPath); err == nil {
		return parseRewardJSON(b)
	} else if !errors.Is(err, sandbox.ErrNotFound) {
		return nil, verifierErr(err)
	}
	b, err := r.readSmall(ctx, txtPath)
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
func (r *run) readSmall(ctx context.Context, p string) ([]byte, error) {
	fi, err := r.sb.Stat(ctx, p)
	if err != nil {
		return nil, err
	}
	if fi.Type != sandbox.FileRegular && fi.Type != sandbox.FileSymlink {
		return nil, fail(VerifierOutputParse, "%s is not a regular file (type %s)", p, fi.Type)
	}
	rc, err := r.sb.Open(ctx, p)
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
