package deploy

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the server's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	rounds   prometheus.Counter
	round    prometheus.Gauge
	enrolled prometheus.Gauge
	parties  prometheus.Gauge
	uploads  *prometheus.CounterVec
	latency  prometheus.Histogram
	eps      prometheus.Gauge
	skipped  prometheus.Counter
	refused  prometheus.Counter
	bans     prometheus.Counter
}

// NewMetrics registers the server's metrics with reg:
//
//	privrec_rounds_total                 rounds folded and committed
//	privrec_round                        the round open or last opened
//	privrec_clients_enrolled             enrolled clients
//	privrec_parties_enrolled             distinct parties among them (a vendor's clients count as one)
//	privrec_uploads_total{result,reason} uploads accepted, and refused by reason
//	privrec_round_seconds                wall time from broadcast to commit
//	privrec_epsilon_spent                the ledger's eps_total: ε spent so far by the method's unit, dropouts included (+Inf when unbounded)
//	privrec_rounds_skipped_total         masked rounds that released nothing (failed after masked vectors were sent)
//	privrec_sums_refused_total           unmasked sums out of the bounds honest clients keep: nothing released
//	privrec_clients_banned_total         clients banned from later rounds
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		rounds:   prometheus.NewCounter(prometheus.CounterOpts{Name: "privrec_rounds_total", Help: "Rounds folded and committed."}),
		round:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "privrec_round", Help: "The round open or last opened."}),
		enrolled: prometheus.NewGauge(prometheus.GaugeOpts{Name: "privrec_clients_enrolled", Help: "Enrolled clients."}),
		parties: prometheus.NewGauge(prometheus.GaugeOpts{Name: "privrec_parties_enrolled",
			Help: "Distinct parties among the enrolled clients: each one-time code is one, the vendor token's clients are one."}),
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "privrec_uploads_total",
			Help: "Uploads accepted, and refused by reason."}, []string{"result", "reason"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "privrec_round_seconds",
			Help: "Wall time of a round, from broadcast to commit.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		eps: prometheus.NewGauge(prometheus.GaugeOpts{Name: "privrec_epsilon_spent",
			Help: "ε spent so far by the method's protected unit (the ledger's eps_total), with the noise that arrived; +Inf when unbounded."}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "privrec_rounds_skipped_total",
			Help: "Masked rounds that released nothing: their secure aggregation failed after masked vectors were sent."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "privrec_sums_refused_total",
			Help: "Unmasked sums outside the bounds honest clients keep: nothing released."}),
		bans: prometheus.NewCounter(prometheus.CounterOpts{Name: "privrec_clients_banned_total", Help: "Clients banned from later rounds."}),
	}
	reg.MustRegister(m.rounds, m.round, m.enrolled, m.parties, m.uploads, m.latency, m.eps, m.skipped, m.refused, m.bans)
	return m
}

func (m *Metrics) accept() {
	if m != nil {
		m.uploads.WithLabelValues("accepted", "").Inc()
	}
}

func (m *Metrics) reject(reason string) {
	if m != nil {
		m.uploads.WithLabelValues("rejected", reason).Inc()
	}
}

func (m *Metrics) setEnrolled(n int) {
	if m != nil {
		m.enrolled.Set(float64(n))
	}
}

func (m *Metrics) setParties(n int) {
	if m != nil {
		m.parties.Set(float64(n))
	}
}

func (m *Metrics) roundOpened(r int) {
	if m != nil {
		m.round.Set(float64(r))
	}
}

func (m *Metrics) roundDone(e LedgerEntry) {
	if m != nil {
		m.rounds.Inc()
		m.latency.Observe(e.Seconds)
		m.eps.Set(epsGauge(e))
	}
}

func (m *Metrics) skip() {
	if m != nil {
		m.skipped.Inc()
	}
}

func (m *Metrics) refuseSum() {
	if m != nil {
		m.refused.Inc()
	}
}

func (m *Metrics) ban() {
	if m != nil {
		m.bans.Inc()
	}
}

// restore sets the gauges from a restored ledger, so that a restarted
// server reports what the run spent before it.
func (m *Metrics) restore(led []LedgerEntry) {
	if m == nil {
		return
	}
	if len(led) > 0 {
		m.eps.Set(epsGauge(led[len(led)-1]))
	}
}

// epsGauge is the value of privrec_epsilon_spent after ledger entry e:
// the run's total ε so far, +Inf when it has no finite bound.
func epsGauge(e LedgerEntry) float64 {
	if e.EpsTotal < 0 {
		return math.Inf(1)
	}
	return e.EpsTotal
}
