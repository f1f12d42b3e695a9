package lockapi

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the lock client's Prometheus metrics: acquisition latency,
// current waiters, acquisitions that timed out, keepalive failures, sessions
// and leases lost, releases being retried, fencing rejections and singleton
// leadership changes.
// Create one per process with NewMetrics and pass it to sessions
// (WithMetrics) and singletons. A nil *Metrics records nothing.
type Metrics struct {
	acquireLatency   prometheus.Histogram
	waiters          prometheus.Gauge
	acquireTimeouts  prometheus.Counter
	keepaliveFails   prometheus.Counter
	sessionsLost     prometheus.Counter
	leasesLostTotal  prometheus.Counter
	fenceRejections  prometheus.Counter
	singletonChanges prometheus.Counter
	releasesPending  prometheus.Gauge
	releaseRetries   prometheus.Counter
	strayReleases    prometheus.Counter
}

// NewMetrics creates the metrics and registers them with r (if not nil).
func NewMetrics(r prometheus.Registerer) (*Metrics, error) {
	const ns, sub = "raftlock", "client"
	m := &Metrics{
		acquireLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "acquire_duration_seconds",
			Help: "Time from Lock/TryLock to the grant, for successful acquisitions.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}),
		waiters: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "waiters",
			Help: "Lock calls currently queued for a lock."}),
		acquireTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "acquire_timeouts_total",
			Help: "Lock calls whose context ended while queued."}),
		keepaliveFails: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "keepalive_failures_total",
			Help: "Session keepalives that failed (session in jeopardy)."}),
		sessionsLost: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "sessions_lost_total",
			Help: "Sessions lost (lease ran out or expired by the leader)."}),
		leasesLostTotal: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "leases_lost_total",
			Help: "Leases that ended other than by Unlock."}),
		fenceRejections: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "fencing_rejections_total",
			Help: "Writes refused by a fence because of a stale token (as reported with Metrics.FenceRejected)."}),
		singletonChanges: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "singleton_leadership_changes_total",
			Help: "Times a singleton job started or stopped running in this process."}),
		releasesPending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "releases_pending",
			Help: "Releases (failed Unlocks, withdrawn waits, stray acquisitions) being retried in the background until they commit or their session ends."}),
		releaseRetries: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "release_retries_total",
			Help: "Attempts to commit a release after its first attempt failed."}),
		strayReleases: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "stray_acquisitions_released_total",
			Help: "Grants or waits of a session under an owner it did not know (abandoned outcomes that landed, delayed duplicates) that it released."}),
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.acquireLatency, m.waiters, m.acquireTimeouts, m.keepaliveFails,
			m.sessionsLost, m.leasesLostTotal, m.fenceRejections, m.singletonChanges,
			m.releasesPending, m.releaseRetries, m.strayReleases} {
			if err := r.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *Metrics) acquired(d time.Duration) {
	if m != nil {
		m.acquireLatency.Observe(d.Seconds())
	}
}

func (m *Metrics) waiting(delta float64) {
	if m != nil {
		m.waiters.Add(delta)
	}
}

func (m *Metrics) acquireTimedOut() {
	if m != nil {
		m.acquireTimeouts.Inc()
	}
}

func (m *Metrics) keepaliveFailed() {
	if m != nil {
		m.keepaliveFails.Inc()
	}
}

func (m *Metrics) sessionLost() {
	if m != nil {
		m.sessionsLost.Inc()
	}
}

func (m *Metrics) leasesLost(n int) {
	if m != nil {
		m.leasesLostTotal.Add(float64(n))
	}
}

func (m *Metrics) releasePending(delta float64) {
	if m != nil {
		m.releasesPending.Add(delta)
	}
}

func (m *Metrics) releaseRetried() {
	if m != nil {
		m.releaseRetries.Inc()
	}
}

func (m *Metrics) unknownReleased() {
	if m != nil {
		m.strayReleases.Inc()
	}
}

func (m *Metrics) singletonChanged() {
	if m != nil {
		m.singletonChanges.Inc()
	}
}

// FenceRejected counts a write refused by a fence. Wire it to a fence's
// OnReject hook:
//
//	f := &fence.SQL{DB: db, OnReject: func(string, uint64, uint64) { m.FenceRejected() }}
func (m *Metrics) FenceRejected() {
	if m != nil {
		m.fenceRejections.Inc()
	}
}
