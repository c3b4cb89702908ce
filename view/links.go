package view

import (
	"html/template"
	"net/url"
	"strconv"
	"strings"

	"github.com/berth-sh/berth/results"
)

// linker makes the links of a page: server routes for `berth view`,
// anchors inside one file for `berth report`. Every name in a link is
// path-escaped: names come from disk that a task influenced.
type linker interface {
	Server() bool // sorting, filtering, paging and raw files exist
	Home() string
	Job(ref results.Ref) string
	Trial(ref results.Ref, name string) string
	Samples(ref results.Ref, name string) string
	Sample(ref results.Ref, name string, i, from int) string
	File(ref results.Ref, name, rel string) string
	Chart(ref results.Ref, chart string) template.URL
}

type serverLinks struct{}

func (serverLinks) Server() bool { return true }
func (serverLinks) Home() string { return "/" }

func (serverLinks) Job(ref results.Ref) string {
	return "/jobs/" + strconv.Itoa(ref.Root) + "/" + url.PathEscape(ref.Name) + "/"
}

func (l serverLinks) Trial(ref results.Ref, name string) string {
	return l.Job(ref) + "trials/" + url.PathEscape(name) + "/"
}

func (l serverLinks) Samples(ref results.Ref, name string) string {
	return l.Trial(ref, name) + "samples"
}

func (l serverLinks) Sample(ref results.Ref, name string, i, from int) string {
	v := url.Values{"s": {strconv.Itoa(i)}}
	if from > 0 {
		v.Set("from", strconv.Itoa(from))
	}
	return l.Samples(ref, name) + "?" + v.Encode()
}

func (l serverLinks) File(ref results.Ref, name, rel string) string {
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return l.Trial(ref, name) + "files/" + strings.Join(parts, "/")
}

func (l serverLinks) Chart(ref results.Ref, chart string) template.URL {
	// Built from escaped names and a fixed chart name only.
	return template.URL(l.Job(ref) + "charts/" + url.PathEscape(chart) + ".svg")
}

// reportLinks points at anchors of the one report file; charts are
// data: URLs of the SVGs drawn for it.
type reportLinks struct {
	job    results.Ref
	index  map[string]int // trial name -> anchor number
	charts map[string]template.URL
}

func (reportLinks) Server() bool                            { return false }
func (reportLinks) Home() string                            { return "#top" }
func (reportLinks) Job(results.Ref) string                  { return "#top" }
func (reportLinks) File(results.Ref, string, string) string { return "" }

func (l reportLinks) Trial(_ results.Ref, name string) string {
	if i, ok := l.index[name]; ok {
		return "#trial-" + strconv.Itoa(i)
	}
	return "#top"
}

func (l reportLinks) Samples(ref results.Ref, name string) string { return l.Trial(ref, name) }

func (l reportLinks) Sample(ref results.Ref, name string, _, _ int) string { return l.Trial(ref, name) }

func (l reportLinks) Chart(_ results.Ref, chart string) template.URL { return l.charts[chart] }
