package node

import "github.com/prometheus/client_golang/prometheus"

// initGrantGauges adds the gauges of shared grants and semaphores (cluster
// version 3) to the state machine's gauges: read grants, semaphores in use,
// their grants and the permits held.
func (m *metrics) initGrantGauges(n *Node) {
	const ns, sub = "raftlock", "node"
	gauge := func(name, help string, f func() float64) {
		m.fsmGauges = append(m.fsmGauges, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, f))
	}
	gauge("read_grants", "Read (shared) grants held over all locks.", func() float64 { return float64(n.fsm.Stats().Readers) })
	gauge("semaphores", "Semaphores in use (held or waited for).", func() float64 { return float64(n.fsm.Stats().Semaphores) })
	gauge("semaphore_grants", "Grants of semaphore permits held.", func() float64 { return float64(n.fsm.Stats().SemaphoreHolders) })
	gauge("semaphore_permits_held", "Semaphore permits held over all semaphores.", func() float64 { return float64(n.fsm.Stats().PermitsHeld) })
}
