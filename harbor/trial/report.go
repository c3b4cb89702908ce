package trial

import (
	"os"
	"path/filepath"

	"github.com/berth-sh/berth/harbor/agent"
	"github.com/berth-sh/berth/results/layout"
)

// report records what an agent that reports (agent.Reporter) says about
// its run: model info and token counts in result.json, its metadata
// (per-turn metrics) as agent_result.metadata, its files in agent/. It
// runs after /logs/agent was downloaded, so the files are the agent's and
// not the sandbox's.
func (r *run) report() {
	rep, ok := r.o.Agent.(agent.Reporter)
	if !ok {
		return
	}
	rp := rep.Report()
	if rp.ModelInfo != nil {
		r.res.AgentInfo.ModelInfo = rp.ModelInfo
	}
	ar := &r.res.AgentResult
	ar.NInputTokens, ar.NOutputTokens, ar.NCacheTokens = rp.InputTokens, rp.OutputTokens, rp.CachedTokens
	if rp.Metadata != nil {
		ar.Metadata = rp.Metadata
	}
	if len(rp.Files) == 0 {
		return
	}
	// Confined to agent/: a link the sandbox left there is not followed.
	root, err := os.OpenRoot(filepath.Join(r.o.Dir, layout.AgentDir))
	if err != nil {
		r.logf("agent report: %v", err)
		return
	}
	defer root.Close()
	for name, data := range rp.Files {
		if !filepath.IsLocal(name) {
			r.logf("agent report: file name %q is not a local path; not written", name)
			continue
		}
		_ = root.Remove(name) // a link in its place is replaced
		if err := root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			r.logf("agent report: %v", err)
			continue
		}
		if err := root.WriteFile(name, data, 0o644); err != nil {
			r.logf("agent report: %v", err)
		}
	}
}
