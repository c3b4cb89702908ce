package view

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"io"
	"time"

	"github.com/berth-sh/berth/results"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// ReportOptions bound a report.
type ReportOptions struct {
	// MaxTrials is how many trials get a details section (0: 1000). The
	// trials table always lists every trial.
	MaxTrials int
	// MaxText bounds each file embedded in a details section (0: 64 KiB).
	MaxText int
	// Samples and SampleTokens bound the samples embedded per trial (0: 3
	// samples of at most 2048 tokens).
	Samples, SampleTokens int
}

// reportPage is the report's data: the job page with every row, and
// every trial's details.
type reportPage struct {
	jobPage
	CSP       string
	CSS       template.CSS
	Generated time.Time
	Omitted   int
}

// Report writes the job in jobDir as one self-contained HTML file: the
// job's summary, every trial in the table, pass@k, charts as data: URLs,
// and each trial's details under an anchor. The file loads nothing: its
// CSP (in a meta tag) allows only its own <style>, by hash, and data:
// images; there is no script.
func Report(ctx context.Context, w io.Writer, jobDir string, o ReportOptions) error {
	if o.MaxTrials <= 0 {
		o.MaxTrials = 1000
	}
	if o.MaxText <= 0 {
		o.MaxText = 64 << 10
	}
	if o.Samples <= 0 {
		o.Samples = 3
	}
	if o.SampleTokens <= 0 {
		o.SampleTokens = 2048
	}
	lib, err := results.Open(jobDir)
	if err != nil {
		return err
	}
	defer lib.Close()
	refs := lib.Refs(ctx)
	if len(refs) != 1 {
		return errdefs.Errorf(errdefs.InvalidArgument, "%s holds %d jobs; give one job directory (it holds config.json and result.json)", jobDir, len(refs))
	}
	j, err := lib.Job(ctx, refs[0])
	if err != nil {
		return err
	}
	pages, err := parsePages()
	if err != nil {
		return err
	}
	links := reportLinks{job: j.Ref, index: map[string]int{}, charts: map[string]template.URL{}}
	for _, name := range chartNames(j) {
		svg, err := jobChart(j, name)
		if err != nil {
			return err
		}
		links.charts[name] = template.URL("data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString(svg))
	}
	q := parseQuery(nil)
	q.Per = max(len(j.Trials), 1)
	data := reportPage{jobPage: buildJobPage(j, q, links), CSP: reportCSP(), CSS: template.CSS(css()), Generated: time.Now().UTC()}
	for i, t := range data.Rows {
		if i >= o.MaxTrials {
			data.Omitted = len(data.Rows) - i
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		links.index[t.Name] = i
		d := lib.Detail(j, t)
		clampTexts(d, o.MaxText)
		tv := trialView{L: links, D: d, Timeline: makeTimeline(t)}
		if d.Samples {
			if f, err := lib.Samples(ctx, j.Ref, t.Name); err == nil {
				for k, s := range f.Samples {
					if k >= o.Samples {
						break
					}
					tv.Samples = append(tv.Samples, makeSampleView(k, s, 0, o.SampleTokens))
				}
			}
		}
		data.Trials = append(data.Trials, tv)
	}
	var b bytes.Buffer
	if err := pages["report"].ExecuteTemplate(&b, "report", data); err != nil {
		return err
	}
	_, err = w.Write(b.Bytes())
	return err
}

func chartNames(j *results.Job) []string {
	out := []string{"reward"}
	for _, p := range j.Stats.Phases {
		if len(p.Seconds) > 0 {
			out = append(out, p.Name)
		}
	}
	return out
}

func css() string {
	b, err := staticFS.ReadFile("static/view.css")
	if err != nil {
		panic(err) // embedded at build time
	}
	return string(b)
}

// reportCSP allows the report's one <style> by its hash and data: images,
// nothing else: no script, no fetch, no external anything.
func reportCSP() string {
	sum := sha256.Sum256([]byte(css()))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; img-src data:; base-uri 'none'; form-action 'none'"
}

// clampTexts cuts the embedded files of a trial to n bytes each.
func clampTexts(d *results.Detail, n int) {
	clamp := func(t *results.Text) {
		if t != nil && len(t.Data) > n {
			t.Data, t.Truncated = t.Data[:n], true
		}
	}
	clamp(d.Instruction)
	clamp(d.Exception)
	clamp(d.TrialLog)
	for _, ts := range [][]*results.Text{d.AgentOutput, d.VerifierOutput, d.RewardFiles} {
		for _, t := range ts {
			clamp(t)
		}
	}
}
