package view

import (
	"net/url"
	"time"

	"github.com/berth-sh/berth/results"
)

// timeline is a trial's phases laid out for an inline SVG: rectangles
// with coordinates as attributes and colours from classes, so the page's
// CSP needs no inline style.
type timeline struct {
	Width, Height int
	Bars          []bar
	Total         time.Duration
}

type bar struct {
	Name        string
	X, Y, W     int
	TextX       int
	Start, Span time.Duration
}

const (
	tlWidth  = 900
	tlLabel  = 260 // room on the left for the phase name
	tlRow    = 22
	tlBarMax = tlWidth - tlLabel - 90
)

func makeTimeline(t *results.Trial) timeline {
	spans := t.Timeline()
	tl := timeline{Width: tlWidth, Height: len(spans)*tlRow + 8, Total: t.Total}
	end := t.Total
	for _, s := range spans {
		end = max(end, s.Start+s.Duration)
	}
	if end <= 0 {
		end = time.Millisecond
	}
	tl.Total = end
	for i, s := range spans {
		x := tlLabel + int(float64(tlBarMax)*float64(s.Start)/float64(end))
		w := max(int(float64(tlBarMax)*float64(s.Duration)/float64(end)), 1)
		tl.Bars = append(tl.Bars, bar{Name: s.Name, X: x, Y: 4 + i*tlRow, W: w, TextX: x + w + 6, Start: s.Start, Span: s.Duration})
	}
	return tl
}

func pathEscape(s string) string { return url.PathEscape(s) }
