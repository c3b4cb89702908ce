package view

import (
	"net/http"
	"strconv"

	"github.com/berth-sh/berth/results"
)

// tokensPer is how many tokens one page of a sample shows.
const tokensPer = 4096

// sampleView is one sample laid out as runs of tokens: a run is a stretch
// with the same loss-mask state, and a turn boundary starts a new one.
type sampleView struct {
	I        int
	S        *results.Sample
	Runs     []run
	From     int
	To       int
	Prev     int // -1 when this is the first window
	Next     int // -1 when this is the last window
	Counters []results.Counter
}

type run struct {
	Turn   int  // turn number when a turn starts with this run, else 0
	Loss   bool // loss_mask 1
	Masked bool // inside the response (loss_mask covers it)
	Tokens []results.Token
}

func (r run) Class() string {
	switch {
	case r.Loss:
		return "loss"
	case r.Masked:
		return "obs"
	}
	return "prompt"
}

func makeSampleView(i int, s *results.Sample, from, n int) sampleView {
	from = min(max(from, 0), max(len(s.Tokens)-1, 0))
	v := sampleView{I: i, S: s, From: from, Prev: -1, Next: -1, Counters: s.TITOCounters()}
	toks := s.Window(from, n)
	v.To = from + len(toks)
	if from > 0 {
		v.Prev = max(from-n, 0)
	}
	if v.To < len(s.Tokens) {
		v.Next = v.To
	}
	for _, t := range toks {
		last := len(v.Runs) - 1
		if last < 0 || t.TurnHead > 0 || v.Runs[last].Loss != t.Loss || v.Runs[last].Masked != t.Masked {
			v.Runs = append(v.Runs, run{Turn: t.TurnHead, Loss: t.Loss, Masked: t.Masked})
			last++
		}
		v.Runs[last].Tokens = append(v.Runs[last].Tokens, t)
	}
	return v
}

func (s *Server) samplesPage(w http.ResponseWriter, r *http.Request) {
	d, ok := s.loadTrial(w, r)
	if !ok {
		return
	}
	name := d.Trial.Name
	f, err := s.lib.Samples(r.Context(), d.Job.Ref, name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	data := struct {
		page
		D    *results.Detail
		F    *results.SampleFile
		Cur  *sampleView
		Page pager
	}{page: page{Title: "Samples of " + name, L: serverLinks{}}, D: d, F: f}
	if len(f.Samples) > 0 {
		i := atoiRange(q.Get("s"), 0, 0, len(f.Samples)-1)
		from, _ := strconv.Atoi(q.Get("from"))
		v := makeSampleView(i, f.Samples[i], from, tokensPer)
		data.Cur = &v
	}
	s.render(w, r, "samples", data)
}
