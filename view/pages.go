package view

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/results"
	"github.com/berth-sh/berth/sandbox/errdefs"
)

// page is what every template gets.
type page struct {
	Title string
	L     linker
	Live  string // the JSON endpoint a running page polls; "" when static
}

type errorPage struct {
	page
	Code    int
	Message string
}

type jobsPage struct {
	page
	Jobs  []*results.Job
	Roots []string
	Refs  []results.Ref // for the compare form
}

type jobPage struct {
	page
	Job        *results.Job
	Q          query
	Rows       []*results.Trial
	Pager      pager
	Tasks      []results.TaskStats
	TaskPager  pager
	ErrorTypes []string
	Refs       []results.Ref
	Trials     []trialView // the report's trial sections
}

type trialView struct {
	L        linker
	D        *results.Detail
	Timeline timeline
	Samples  []sampleView // the report inlines a few
}

func (s *Server) jobsPage(w http.ResponseWriter, r *http.Request) {
	data := jobsPage{page: page{Title: "Jobs", L: serverLinks{}}, Roots: s.lib.Roots()}
	for _, ref := range s.lib.Refs(r.Context()) {
		j, err := s.lib.Job(r.Context(), ref)
		if err != nil {
			continue
		}
		data.Jobs = append(data.Jobs, j)
		data.Refs = append(data.Refs, ref)
		if j.Live() {
			data.Live = "/api/jobs"
		}
	}
	// Newest first.
	slices.SortStableFunc(data.Jobs, func(a, b *results.Job) int { return b.StartedAt().Compare(a.StartedAt()) })
	s.render(w, r, "jobs", data)
}

// loadJob reads the job the route names; when it cannot, it has answered
// with the error page.
func (s *Server) loadJob(w http.ResponseWriter, r *http.Request) (*results.Job, bool) {
	ref, err := ref(r)
	if err == nil {
		var j *results.Job
		if j, err = s.lib.Job(r.Context(), ref); err == nil {
			return j, true
		}
	}
	s.fail(w, r, err)
	return nil, false
}

// loadTrial reads the trial the route names, as loadJob does.
func (s *Server) loadTrial(w http.ResponseWriter, r *http.Request) (*results.Detail, bool) {
	ref, err := ref(r)
	if err == nil {
		var d *results.Detail
		if d, err = s.lib.Trial(r.Context(), ref, r.PathValue("trial")); err == nil {
			return d, true
		}
	}
	s.fail(w, r, err)
	return nil, false
}

func (s *Server) jobPage(w http.ResponseWriter, r *http.Request) {
	j, ok := s.loadJob(w, r)
	if !ok {
		return
	}
	ref := j.Ref
	data := buildJobPage(j, parseQuery(r.URL.Query()), serverLinks{})
	data.Refs = s.lib.Refs(r.Context())
	if j.Live() {
		data.Live = "/api/jobs/" + strconv.Itoa(ref.Root) + "/" + pathEscape(ref.Name)
	}
	s.render(w, r, "job", data)
}

// buildJobPage filters, sorts and pages the trials; the report uses it
// with every row on one page.
func buildJobPage(j *results.Job, q query, l linker) jobPage {
	data := jobPage{page: page{Title: j.Name(), L: l}, Job: j, Q: q}
	rows := q.sort(q.filter(j.Trials))
	data.Pager = paginate(len(rows), q.Page, q.Per)
	a, b := data.Pager.slice(len(rows))
	data.Rows = rows[a:b]
	tasks := j.Stats.Tasks
	if q.Task != "" {
		tasks = slices.DeleteFunc(slices.Clone(tasks), func(t results.TaskStats) bool {
			return !strings.Contains(strings.ToLower(t.Task), strings.ToLower(q.Task))
		})
	}
	data.TaskPager = paginate(len(tasks), q.TPage, taskPer)
	if !l.Server() {
		data.TaskPager = paginate(len(tasks), 1, max(len(tasks), 1))
	}
	a, b = data.TaskPager.slice(len(tasks))
	data.Tasks = tasks[a:b]
	for _, e := range j.Stats.Errors {
		data.ErrorTypes = append(data.ErrorTypes, e.Name)
	}
	return data
}

func (s *Server) trialPage(w http.ResponseWriter, r *http.Request) {
	d, ok := s.loadTrial(w, r)
	if !ok {
		return
	}
	ref := d.Job.Ref
	data := struct {
		page
		T trialView
	}{page: page{Title: d.Trial.Name, L: serverLinks{}}, T: trialView{L: serverLinks{}, D: d, Timeline: makeTimeline(d.Trial)}}
	if d.Trial.State == results.StateRunning {
		data.Live = "/api/jobs/" + strconv.Itoa(ref.Root) + "/" + pathEscape(ref.Name)
	}
	s.render(w, r, "trial", data)
}

// chart draws one of a job's charts: reward.svg or <phase>.svg.
func (s *Server) chart(w http.ResponseWriter, r *http.Request) {
	j, ok := s.loadJob(w, r)
	if !ok {
		return
	}
	svg, err := jobChart(j, strings.TrimSuffix(r.PathValue("chart"), ".svg"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	_, _ = w.Write(svg)
}

func jobChart(j *results.Job, name string) ([]byte, error) {
	if name == "reward" {
		return rewardChart(j.Stats.Rewards)
	}
	for _, ps := range j.Stats.Phases {
		if ps.Name == name {
			return latencyChart(ps)
		}
	}
	return nil, errdefs.Errorf(errdefs.NotFound, "no chart %q", name)
}

// rawFile serves one file of a trial as plain text, bounded, under a CSP
// that runs nothing (and nosniff, so no browser guesses HTML).
func (s *Server) rawFile(w http.ResponseWriter, r *http.Request) {
	ref, err := ref(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	txt, err := s.lib.File(r.Context(), ref, r.PathValue("trial"), r.PathValue("path"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", rawCSP)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	if txt.Truncated {
		h.Set("X-Berth-Truncated", fmt.Sprintf("first %d of %d bytes", len(txt.Data), txt.Size))
	}
	_, _ = w.Write(txt.Data)
}

func (s *Server) comparePage(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	data := struct {
		page
		C       *results.Comparison
		Refs    []results.Ref
		A, B    string
		Changed bool
	}{page: page{Title: "Compare jobs", L: serverLinks{}}, Refs: s.lib.Refs(r.Context()), A: v.Get("a"), B: v.Get("b"), Changed: v.Get("changed") != ""}
	if data.A != "" && data.B != "" {
		a, err := s.loadRef(r, data.A)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		b, err := s.loadRef(r, data.B)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		data.C = results.Compare(a, b)
		if data.Changed {
			data.C.Rows = slices.DeleteFunc(data.C.Rows, func(d results.TaskDelta) bool { return d.Delta == 0 })
		}
		data.Title = "Compare " + a.Name() + " and " + b.Name()
	}
	s.render(w, r, "compare", data)
}

func (s *Server) loadRef(r *http.Request, v string) (*results.Job, error) {
	ref, err := results.ParseRef(v)
	if err != nil {
		return nil, err
	}
	return s.lib.Job(r.Context(), ref)
}

// pulse is what live.js polls.
type pulse struct {
	Live    bool      `json:"live"`
	Status  string    `json:"status"`
	Done    int       `json:"done"`
	Trials  int       `json:"trials"`
	Total   int       `json:"total"`
	Updated time.Time `json:"updated"`
	Sig     string    `json:"sig"` // changes whenever the page would
}

func jobPulse(j *results.Job) pulse {
	p := pulse{Live: j.Live(), Status: j.Status, Done: j.Stats.Done, Trials: j.Stats.Trials, Total: j.Total()}
	if j.Result != nil {
		p.Updated = j.Result.UpdatedAt
	}
	p.Sig = fmt.Sprintf("%s/%d/%d/%d/%d", p.Status, p.Done, p.Trials, p.Total, p.Updated.UnixNano())
	return p
}

func (s *Server) jobAPI(w http.ResponseWriter, r *http.Request) {
	ref, err := ref(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	j, err := s.lib.Job(r.Context(), ref)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	writeJSON(w, jobPulse(j))
}

func (s *Server) jobsAPI(w http.ResponseWriter, r *http.Request) {
	all := pulse{}
	var sig strings.Builder
	for _, ref := range s.lib.Refs(r.Context()) {
		j, err := s.lib.Job(r.Context(), ref)
		if err != nil {
			continue
		}
		p := jobPulse(j)
		all.Live = all.Live || p.Live
		all.Done += p.Done
		all.Trials += p.Trials
		all.Total += p.Total
		sig.WriteString(ref.String() + "=" + p.Sig + ";")
	}
	all.Sig = sig.String()
	writeJSON(w, all)
}
