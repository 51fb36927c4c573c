package webhook

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the sender's Prometheus metrics (docs/operations.md). Every
// method is safe on a nil *Metrics. Labels have bounded values: outcomes
// and failure reasons, never an endpoint URL, a session or a run.
type Metrics struct {
	reg      prometheus.Registerer
	outcomes *prometheus.CounterVec
	failures *prometheus.CounterVec
	attempts prometheus.Histogram
	lags     prometheus.Histogram
}

// NewMetrics registers the webhook metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reg: reg,
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "runhub", Name: "webhook_notifications_total",
			Help: "Notifications done with, per endpoint, by outcome: delivered (2xx), gave_up (retries exhausted), disabled (410 Gone), dropped (event gone), skipped (the run opted out)."},
			[]string{"outcome"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "runhub", Name: "webhook_attempts_failed_total",
			Help: "Delivery attempts that failed and are retried or given up, by reason: status (not 2xx/410), timeout, dns, network."},
			[]string{"reason"}),
		attempts: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "runhub", Name: "webhook_attempt_seconds",
			Help: "Duration of one delivery attempt, until the status line or the error.", Buckets: prometheus.ExponentialBuckets(0.005, 4, 8)}),
		lags: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "runhub", Name: "webhook_delivery_seconds",
			Help: "Time from a notification's first attempt to its acknowledgement (retries included).", Buckets: prometheus.ExponentialBuckets(0.005, 4, 12)}),
	}
	for _, o := range []string{Delivered, GaveUp, Disabled, Dropped, Skipped} {
		m.outcomes.WithLabelValues(o)
	}
	for _, r := range []string{"status", "timeout", "dns", "network"} {
		m.failures.WithLabelValues(r)
	}
	reg.MustRegister(m.outcomes, m.failures, m.attempts, m.lags)
	return m
}

func (m *Metrics) outcome(o string) {
	if m != nil {
		m.outcomes.WithLabelValues(o).Inc()
	}
}

func (m *Metrics) failed(reason string) {
	if m != nil {
		m.failures.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) attempted(d time.Duration) {
	if m != nil {
		m.attempts.Observe(d.Seconds())
	}
}

func (m *Metrics) lag(d time.Duration) {
	if m != nil {
		m.lags.Observe(d.Seconds())
	}
}

// queue registers the gauge of pending notifications.
func (m *Metrics) queue(pending func() int) {
	if m != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "runhub", Name: "webhook_queue_depth",
			Help: "Notifications this hub holds that some endpoint has not yet acknowledged, given up or disabled."},
			func() float64 { return float64(pending()) }))
	}
}
