package session

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/berth-sh/berth/session/tito"
)

// metrics are the server's Prometheus series, on a registry of its own
// (two servers in one process do not collide). No label carries a session
// id: cardinality stays bounded.
type metrics struct {
	reg          *prometheus.Registry
	turns        *prometheus.CounterVec
	mismatches   *prometheus.CounterVec
	checked      prometheus.Counter
	retoken      prometheus.Counter
	enginePrompt prometheus.Counter
	rollbacks    prometheus.Counter
	expired      prometheus.Counter
	authFails    prometheus.Counter
	busy         prometheus.Counter
	prepare      prometheus.Histogram
	upstream     prometheus.Histogram
}

func newMetrics(live, buffered func() float64) *metrics {
	buckets := []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_session_turns_total",
			Help: "Chat turns by outcome: committed, skipped (the session changed during the engine call), passthrough (engine status not 200), refused (400, 409), aborted (410: the session was aborted), tokenization_error (500), upstream_error (502).",
		}, []string{"outcome"}),
		mismatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_session_tito_mismatches_total",
			Help: "Differences between a session's accumulated ids and a fresh rendering of its transcript, counted when its samples are collected. special_token_count, special_token_type and non_assistant_text must stay 0.",
		}, []string{"type"}),
		checked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_session_tito_checked_total", Help: "Sessions whose samples were collected and checked for mismatches.",
		}),
		retoken: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_session_retokenized_turns_total", Help: "Turns whose output ids came from this server's tokenizer (the engine returned text only).",
		}),
		enginePrompt: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_session_engine_prompt_mismatch_total", Help: "Turns where an engine that renders its own prompt (vLLM) saw other ids than the session's.",
		}),
		rollbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_session_rollbacks_total", Help: "Retries that discarded the last generated turn.",
		}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_session_expired_total", Help: "Sessions removed after the idle timeout.",
		}),
		authFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_session_auth_failures_total", Help: "Requests refused for a missing or wrong API key.",
		}),
		busy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_session_busy_refusals_total", Help: "Requests refused (503, 429) because the request bodies in memory were at their bound.",
		}),
		prepare: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "berth_session_prepare_seconds", Help: "Time from a turn's arrival to its prompt ids: reading the body, waiting for room to tokenize, preparing under the session lock.", Buckets: buckets,
		}),
		upstream: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "berth_session_upstream_seconds", Help: "Time of the engine call of a turn.", Buckets: buckets,
		}),
	}
	live_ := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "berth_session_sessions", Help: "Live sessions."}, live)
	buffered_ := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "berth_session_buffered_bytes", Help: "Bytes of request bodies held in memory (bounded by MaxBufferedBytes)."}, buffered)
	m.reg.MustRegister(m.turns, m.mismatches, m.checked, m.retoken, m.enginePrompt, m.rollbacks, m.expired, m.authFails, m.busy,
		m.prepare, m.upstream, live_, buffered_, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, t := range tito.MismatchTypes {
		m.mismatches.WithLabelValues(t) // every type exported from the start, at 0
	}
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
