package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the daemon's Prometheus metrics, served at GET /metrics.
type Metrics struct {
	reg        *prometheus.Registry
	createTime prometheus.Histogram
	execTime   prometheus.Histogram
	events     *prometheus.CounterVec
	errors     *prometheus.CounterVec
	states     *prometheus.GaugeVec
}

// NewMetrics registers the daemon's metrics in a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		createTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "paddock_sandbox_create_seconds", Help: "Time to create a sandbox (API call).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}),
		execTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "paddock_exec_seconds", Help: "Time of exec calls, including the command's own run time.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paddock_lifecycle_events_total", Help: "Sandbox lifecycle and reaper actions (create, delete, expire, pause, resume, stop, start, idle, exited, cost_limit).",
		}, []string{"event"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paddock_api_errors_total", Help: "API error answers by error code.",
		}, []string{"code"}),
		states: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "paddock_sandboxes", Help: "Sandboxes on record by state (idle warm-pool sandboxes excluded).",
		}, []string{"state"}),
	}
	m.reg.MustRegister(m.createTime, m.execTime, m.events, m.errors, m.states,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Event counts a lifecycle event; pass it as manager.Config.Events.
func (m *Metrics) Event(name string) {
	if m != nil {
		m.events.WithLabelValues(name).Inc()
	}
}

func (m *Metrics) apiError(code string) {
	if m != nil {
		m.errors.WithLabelValues(code).Inc()
	}
}

// serve answers GET /metrics, refreshing the state gauges first.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	m := s.cfg.Metrics
	if m == nil {
		http.NotFound(w, r)
		return
	}
	counts, err := s.mgr.CountByState(r.Context())
	if err == nil {
		m.states.Reset()
		for state, n := range counts {
			m.states.WithLabelValues(state).Set(float64(n))
		}
	}
	promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}
