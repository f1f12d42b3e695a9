package transport

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the transport's Prometheus collectors. They always exist (so
// code and tests need no nil checks) and are registered only when
// Config.Registerer is set.
type metrics struct {
	accepted      *prometheus.CounterVec // protocol
	rejected      *prometheus.CounterVec // reason
	calls         *prometheus.CounterVec // outcome
	callLatency   prometheus.Histogram
	served        *prometheus.CounterVec // outcome
	protocol      prometheus.Counter     // connections closed for a protocol violation
	raftIdle      prometheus.Counter     // inbound Raft connections closed as idle
	refusedByPeer prometheus.Counter     // hellos in which the peer refused this node
}

// Outcome label values of calls and served requests.
const (
	outcomeOK        = "ok"
	outcomeRemote    = "remote_error"
	outcomeCanceled  = "canceled"
	outcomeDeadline  = "deadline"
	outcomeConnLost  = "connection_lost"
	outcomeDial      = "dial_error"
	outcomeClosed    = "closed"
	outcomeTooLarge  = "too_large"
	outcomeHandlerOK = "ok"
	outcomeHandlerEr = "error"
	outcomePanic     = "panic"
	outcomeNoHandler = "no_handler"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "raftlock", "transport"
	m := &metrics{
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "connections_accepted_total",
			Help: "Inbound connections that passed the handshake, by protocol (raft, rpc).",
		}, []string{"protocol"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "handshakes_rejected_total",
			Help: "Connections refused before use, by reason: inbound handshake failures and limits, and identity refusals in either direction.",
		}, []string{"reason"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "rpc_calls_total",
			Help: "Outbound RPC calls, by outcome (ok or the kind of error).",
		}, []string{"outcome"}),
		callLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "rpc_call_duration_seconds",
			Help:    "Latency of outbound RPC calls that got a response (ok or remote error).",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16), // 50µs … ~1.6s
		}),
		served: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "rpc_requests_served_total",
			Help: "Inbound RPC requests handled, by outcome.",
		}, []string{"outcome"}),
		protocol: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "protocol_errors_total",
			Help: "Connections closed because the peer broke the RPC frame or Raft chunk protocol.",
		}),
		raftIdle: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "raft_idle_closed_total",
			Help: "Inbound Raft connections closed because nothing arrived (or no response could be written) for RaftIdleTimeout.",
		}),
		refusedByPeer: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "refused_by_peer_total",
			Help: "Connections (either direction) on which the peer refused this node's identity in the hello.",
		}),
	}
	for _, r := range rejectReasons {
		m.rejected.WithLabelValues(r)
	}
	for _, p := range []string{"raft", "rpc"} {
		m.accepted.WithLabelValues(p)
	}
	for _, o := range []string{outcomeOK, outcomeRemote, outcomeCanceled, outcomeDeadline, outcomeConnLost, outcomeDial, outcomeClosed, outcomeTooLarge} {
		m.calls.WithLabelValues(o)
	}
	for _, o := range []string{outcomeHandlerOK, outcomeHandlerEr, outcomePanic, outcomeNoHandler, outcomeTooLarge} {
		m.served.WithLabelValues(o)
	}
	if reg == nil {
		return m, nil
	}
	var done []prometheus.Collector
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			for _, d := range done {
				reg.Unregister(d)
			}
			return nil, fmt.Errorf("transport: registering metrics: %w", err)
		}
		done = append(done, c)
	}
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.accepted, m.rejected, m.calls, m.callLatency, m.served, m.protocol, m.raftIdle, m.refusedByPeer}
}

// unregister removes the collectors again (used when New fails late).
func (m *metrics) unregister(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	for _, c := range m.collectors() {
		reg.Unregister(c)
	}
}
