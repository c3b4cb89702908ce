package core

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the server's Prometheus series, on a registry of its own so
// that two servers in one process (tests) do not collide. No label carries
// a key, token or sandbox ID: cardinality stays bounded.
type Metrics struct {
	reg         *prometheus.Registry
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	live        prometheus.GaugeFunc
	Creates     *prometheus.CounterVec // by result: ok, refused, failed
	Deletes     *prometheus.CounterVec // by reason: api, timeout, shutdown
	Execs       prometheus.Counter
	AuthFails   *prometheus.CounterVec // by plane
	RateLimited prometheus.Counter
}

func newMetrics(live func() float64) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_serve_requests_total", Help: "HTTP requests by plane, route and status code.",
		}, []string{"plane", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "berth_serve_request_duration_seconds", Help: "Time to answer a request (to the end of a stream).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"plane", "route"}),
		live: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berth_serve_sandboxes_live", Help: "Sandboxes the server holds.",
		}, live),
		Creates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_serve_sandbox_creates_total", Help: "Sandbox creates by result (ok, refused, failed).",
		}, []string{"result"}),
		Deletes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_serve_sandbox_deletes_total", Help: "Sandbox deletes by reason (api, timeout, shutdown).",
		}, []string{"reason"}),
		Execs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_serve_execs_total", Help: "Processes started through the data plane.",
		}),
		AuthFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_serve_auth_failures_total", Help: "Refused API keys (control) and access tokens (data).",
		}, []string{"plane"}),
		RateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_serve_rate_limited_total", Help: "Creates refused with 429 by the per-key cap.",
		}),
	}
	m.reg.MustRegister(m.requests, m.duration, m.live, m.Creates, m.Deletes, m.Execs, m.AuthFails, m.RateLimited,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the series in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// MustRegister adds an API's own series.
func (m *Metrics) MustRegister(cs ...prometheus.Collector) { m.reg.MustRegister(cs...) }
