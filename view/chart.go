package view

import (
	"bytes"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/berth-sh/berth/results"
)

// Charts are SVG drawn on the server with gonum/plot (a maintained
// plotting library, compiled in: no JavaScript, no CDN), so they show with
// JavaScript off and in the self-contained report. Pages load them as
// images, which keeps the page's CSP free of inline styles. No text from
// a sandbox goes into a chart: only numbers and phase names.

var (
	barColor = color.RGBA{R: 0x4c, G: 0x78, B: 0xa8, A: 0xff}
	p50Color = color.RGBA{R: 0x2a, G: 0x9d, B: 0x3f, A: 0xff}
	p95Color = color.RGBA{R: 0xd6, G: 0x3b, B: 0x2f, A: 0xff}
)

const (
	chartW = 5.2 * vg.Inch
	chartH = 2.4 * vg.Inch
)

// rewardChart is a histogram of rewards: ten bins over [0, 1] when every
// reward is in it, else over the rewards' range.
func rewardChart(rewards []float64) ([]byte, error) {
	lo, hi := 0.0, 1.0
	for _, r := range rewards {
		lo, hi = math.Min(lo, r), math.Max(hi, r)
	}
	p := newPlot("Rewards", "reward", "trials")
	p.Add(histogram(rewards, lo, hi, 10))
	p.X.Min, p.X.Max = lo, hi
	return render(p)
}

// latencyChart is a histogram of one phase's durations with its p50 and
// p95 marked.
func latencyChart(ps results.PhaseStats) ([]byte, error) {
	hi := 0.0
	if n := len(ps.Seconds); n > 0 {
		hi = ps.Seconds[n-1]
	}
	if hi <= 0 {
		hi = 0.001
	}
	p := newPlot(ps.Name, "seconds", "trials")
	h := histogram(ps.Seconds, 0, hi*1.0001, 30)
	p.Add(h)
	top := 1.0
	for _, b := range h.Bins {
		top = math.Max(top, b.Weight)
	}
	for _, m := range []struct {
		name string
		v    float64
		c    color.Color
		dash []vg.Length
	}{{"p50", ps.P50, p50Color, nil}, {"p95", ps.P95, p95Color, []vg.Length{vg.Points(4), vg.Points(2)}}} {
		l, err := plotter.NewLine(plotter.XYs{{X: m.v, Y: 0}, {X: m.v, Y: top}})
		if err != nil {
			return nil, err
		}
		l.Color, l.Width, l.Dashes = m.c, vg.Points(2), m.dash
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s %s", m.name, secs(m.v)), l)
	}
	p.Legend.Top = true
	p.X.Min, p.X.Max = 0, hi
	return render(p)
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	for _, s := range []*draw.TextStyle{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle,
		&p.X.Tick.Label, &p.Y.Tick.Label, &p.Legend.TextStyle} {
		s.Font.Variant = "Sans"
	}
	p.Y.Min = 0
	return p
}

// histogram bins values into n equal bins over [lo, hi]; hi falls in the
// last bin.
func histogram(values []float64, lo, hi float64, n int) *plotter.Histogram {
	w := (hi - lo) / float64(n)
	bins := make([]plotter.HistogramBin, n)
	for i := range bins {
		bins[i] = plotter.HistogramBin{Min: lo + float64(i)*w, Max: lo + float64(i+1)*w}
	}
	for _, v := range values {
		i := int((v - lo) / w)
		bins[min(max(i, 0), n-1)].Weight++
	}
	return &plotter.Histogram{Bins: bins, Width: w, FillColor: barColor, LineStyle: draw.LineStyle{Color: color.White, Width: vg.Points(0.5)}}
}

func render(p *plot.Plot) ([]byte, error) {
	wt, err := p.WriterTo(chartW, chartH, "svg")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
