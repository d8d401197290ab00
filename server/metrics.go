package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolcall-lab/lab/model"
)

// metrics are the server's Prometheus metrics, in a registry of its own so
// that two servers in one process (tests) never share counters.
// docs/metrics.md describes each one.
type metrics struct {
	registry       *prometheus.Registry
	connections    *prometheus.GaugeVec   // by role
	framesIn       *prometheus.CounterVec // by type
	framesOut      *prometheus.CounterVec // by type
	refused        *prometheus.CounterVec // by reason
	deliveries     *prometheus.CounterVec // by notice
	injections     *prometheus.CounterVec // by mode
	appendLatency  prometheus.Histogram
	slowCloses     prometheus.Counter
	connectRefused *prometheus.CounterVec // by reason
	seqConflicts   prometheus.Counter
	replicaEvents  prometheus.Counter
	codeChecks     *prometheus.CounterVec // by how: ran, kept
	codeRunning    prometheus.Gauge
	codeWaiting    prometheus.Gauge

	// The counters of every known frame type and delivery notice, resolved
	// once: looking a label up on every frame cost 1.4 % of the server's
	// CPU. Read-only after newMetrics.
	framesInBy                   map[string]prometheus.Counter
	framesOutState, framesOutErr prometheus.Counter
	deliveriesBy                 map[string]prometheus.Counter // by notice
}

// frameTypesIn are the values of lab_frames_in_total's type label.
var frameTypesIn = []string{"start", "queueReply", "queueDeadline", "deliver", "rename", "watch", "unwatch", "invalid"}

// delivered counts a delivery that left notice.
func (m *metrics) delivered(notice string) {
	if c, ok := m.deliveriesBy[notice]; ok {
		c.Inc()
		return
	}
	m.deliveries.WithLabelValues(notice).Inc()
}

// frameIn counts a received frame of type typ.
func (m *metrics) frameIn(typ string) {
	if c, ok := m.framesInBy[typ]; ok {
		c.Inc()
		return
	}
	m.framesIn.WithLabelValues(typ).Inc()
}

func newMetrics(sessions func() float64) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lab_connections", Help: "Open WebSocket connections.",
		}, []string{"role"}),
		framesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lab_frames_in_total", Help: "Frames received from clients, by frame type (invalid: not a known frame).",
		}, []string{"type"}),
		framesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lab_frames_out_total", Help: "Frames written to clients, by frame type.",
		}, []string{"type"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lab_refused_frames_total", Help: "Client frames refused with an error frame, by reason.",
		}, []string{"reason"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lab_deliveries_total", Help: "Held messages delivered, by the notice the delivery produced.",
		}, []string{"notice"}),
		injections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lab_injections_total", Help: "Messages an instructor injected, by mode (hold, deliver).",
		}, []string{"mode"}),
		appendLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "lab_store_append_seconds", Help: "Time from a change being decided to its event being stored.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		slowCloses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lab_slow_connection_closes_total", Help: "Connections closed because they could not keep up (write timeout or too many waiting error frames).",
		}),
		connectRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lab_connections_refused_total", Help: "WebSocket upgrades refused, by reason.",
		}, []string{"reason"}),
		seqConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lab_seq_conflicts_total", Help: "Appends refused because another replica had stored that seq first; the change was decided again.",
		}),
		codeChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lab_code_checks_total", Help: "Code checks ended, by how: ran (in a sandbox) or kept (the outcome of an earlier check of the same program and cases, reused).",
		}, []string{"how"}),
		codeRunning: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lab_code_checks_running", Help: "Code checks under way: more than one only while the class makes no changes (the checker leaves it a core).",
		}),
		codeWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lab_code_checks_waiting", Help: "Sessions whose code check waits in the fair line for a core (a session waits once: a newer program replaces its waiting one).",
		}),
		replicaEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lab_replica_events_total", Help: "Changes decided by another replica, read from the log and applied here.",
		}),
	}
	m.framesInBy = make(map[string]prometheus.Counter, len(frameTypesIn))
	for _, t := range frameTypesIn {
		m.framesInBy[t] = m.framesIn.WithLabelValues(t)
	}
	m.framesOutState, m.framesOutErr = m.framesOut.WithLabelValues("state"), m.framesOut.WithLabelValues("error")
	notices := model.DeliveryNotices() // lab_deliveries_total's label values
	m.deliveriesBy = make(map[string]prometheus.Counter, len(notices))
	for _, n := range notices {
		m.deliveriesBy[n] = m.deliveries.WithLabelValues(n)
	}
	m.registry.MustRegister(
		m.connections, m.framesIn, m.framesOut, m.refused, m.deliveries, m.injections,
		m.appendLatency, m.slowCloses, m.connectRefused, m.seqConflicts, m.replicaEvents, m.codeChecks, m.codeRunning, m.codeWaiting,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "lab_sessions", Help: "Sessions the server holds.",
		}, sessions),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
