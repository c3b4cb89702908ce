package view

import (
	"cmp"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-sh/berth/results"
)

// Trials table paging.
const (
	defaultPer = 50
	maxPer     = 500
	taskPer    = 100 // rows of the pass@k table per page
)

// query is the trials table's state, all in the URL so that sorting,
// filtering and paging work without JavaScript and links can be shared.
type query struct {
	Sort    string // a column key
	Desc    bool
	Task    string // substring of the task name
	Error   string // an exception type, "none" or "any"
	Outcome string // pass, fail, error, running, incomplete, unreadable
	Page    int    // from 1
	Per     int
	TPage   int // page of the pass@k table
}

// columns are the sortable keys of the trials table; phase keys are the
// phase names.
var columns = append([]string{"task", "attempt", "trial", "reward", "exit", "error", "total"}, results.PhaseNames...)

func parseQuery(v url.Values) query {
	q := query{Sort: v.Get("sort"), Desc: v.Get("dir") == "desc", Task: bound(v.Get("task"), 200),
		Error: bound(v.Get("error"), 200), Outcome: bound(v.Get("outcome"), 20)}
	if !slices.Contains(columns, q.Sort) {
		q.Sort, q.Desc = "task", false
	}
	q.Page = atoiRange(v.Get("page"), 1, 1, 1<<30)
	q.Per = atoiRange(v.Get("per"), defaultPer, 1, maxPer)
	q.TPage = atoiRange(v.Get("tpage"), 1, 1, 1<<30)
	return q
}

func bound(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func atoiRange(s string, def, lo, hi int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return min(max(n, lo), hi)
}

// values encodes q, leaving defaults out.
func (q query) values() url.Values {
	v := url.Values{}
	if q.Sort != "task" || q.Desc {
		v.Set("sort", q.Sort)
		if q.Desc {
			v.Set("dir", "desc")
		}
	}
	for k, s := range map[string]string{"task": q.Task, "error": q.Error, "outcome": q.Outcome} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Page > 1 {
		v.Set("page", strconv.Itoa(q.Page))
	}
	if q.Per != defaultPer {
		v.Set("per", strconv.Itoa(q.Per))
	}
	if q.TPage > 1 {
		v.Set("tpage", strconv.Itoa(q.TPage))
	}
	return v
}

func (q query) url() string {
	if e := q.values().Encode(); e != "" {
		return "?" + e
	}
	return "?"
}

// SortURL is the link of a column header: sort by it, or flip the order
// when it is the sort column already; back to page 1.
func (q query) SortURL(col string) string {
	n := q
	n.Page = 1
	if q.Sort == col {
		n.Desc = !q.Desc
	} else {
		n.Sort, n.Desc = col, col == "reward" || col == "total" || slices.Contains(results.PhaseNames, col)
	}
	return n.url()
}

// SortMark is the arrow of the sort column.
func (q query) SortMark(col string) string {
	switch {
	case q.Sort != col:
		return ""
	case q.Desc:
		return " ▼"
	}
	return " ▲"
}

// AriaSort is the aria-sort value of a column header.
func (q query) AriaSort(col string) string {
	switch {
	case q.Sort != col:
		return "none"
	case q.Desc:
		return "descending"
	}
	return "ascending"
}

// PageURL links page p of the trials table.
func (q query) PageURL(p int) string {
	n := q
	n.Page = p
	return n.url()
}

// TPageURL links page p of the pass@k table.
func (q query) TPageURL(p int) string {
	n := q
	n.TPage = p
	return n.url()
}

// ErrorURL filters by one exception type.
func (q query) ErrorURL(typ string) string {
	n := q
	n.Error, n.Page = typ, 1
	return n.url()
}

// filter keeps the trials that pass q's filters.
func (q query) filter(ts []*results.Trial) []*results.Trial {
	if q.Task == "" && q.Error == "" && q.Outcome == "" {
		return ts
	}
	task := strings.ToLower(q.Task)
	out := make([]*results.Trial, 0, len(ts))
	for _, t := range ts {
		if task != "" && !strings.Contains(strings.ToLower(t.Task), task) {
			continue
		}
		switch q.Error {
		case "":
		case "none":
			if t.ErrorType != "" {
				continue
			}
		case "any":
			if t.ErrorType == "" {
				continue
			}
		default:
			if t.ErrorType != q.Error {
				continue
			}
		}
		if q.Outcome != "" && t.Outcome() != q.Outcome {
			continue
		}
		out = append(out, t)
	}
	return out
}

// sort orders a copy of ts by q's column, ties by task, attempt, name.
func (q query) sort(ts []*results.Trial) []*results.Trial {
	out := slices.Clone(ts)
	key := q.Sort
	phase := slices.Index(results.PhaseNames, key)
	by := func(a, b *results.Trial) int {
		switch {
		case key == "reward":
			return cmp.Compare(rewardKey(a), rewardKey(b))
		case key == "attempt":
			return cmp.Compare(a.Attempt, b.Attempt)
		case key == "trial":
			return cmp.Compare(a.Name, b.Name)
		case key == "exit":
			return cmp.Compare(a.ExitStatus, b.ExitStatus)
		case key == "error":
			return cmp.Compare(a.ErrorType, b.ErrorType)
		case key == "total":
			return cmp.Compare(a.Total, b.Total)
		case phase >= 0:
			return cmp.Compare(phaseOf(a, phase), phaseOf(b, phase))
		}
		return cmp.Compare(a.Task, b.Task)
	}
	slices.SortStableFunc(out, func(a, b *results.Trial) int {
		c := by(a, b)
		if q.Desc {
			c = -c
		}
		return cmp.Or(c, cmp.Compare(a.Task, b.Task), cmp.Compare(a.Attempt, b.Attempt), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// rewardKey sorts trials without a result below every reward.
func rewardKey(t *results.Trial) float64 {
	if t.State != results.StateDone {
		return -1e308
	}
	return t.Reward
}

func phaseOf(t *results.Trial, i int) int64 {
	if i < len(t.Phases) {
		return int64(t.Phases[i])
	}
	return -1
}

// pager is the position in a paged list.
type pager struct {
	Page, Pages, Per, Total int
	First, Last             int // 1-based rows shown
	Links                   []int
}

func paginate(total, page, per int) pager {
	p := pager{Page: page, Per: per, Total: total, Pages: max((total+per-1)/per, 1)}
	p.Page = min(p.Page, p.Pages)
	if total > 0 {
		p.First = (p.Page-1)*per + 1
		p.Last = min(p.Page*per, total)
	}
	// First, last and a window around the current page.
	for i := 1; i <= p.Pages; i++ {
		if i == 1 || i == p.Pages || (i >= p.Page-3 && i <= p.Page+3) {
			p.Links = append(p.Links, i)
		}
	}
	return p
}

func (p pager) slice(n int) (int, int) {
	if p.Total == 0 {
		return 0, 0
	}
	return p.First - 1, min(p.Last, n)
}
