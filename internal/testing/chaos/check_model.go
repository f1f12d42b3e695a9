package chaos

import (
	"sort"
	"time"

	"github.com/raftlock/raftlock/internal/testing/model/lease"
)

// CheckModel: the run's lease trace (History.LeaseTrace) replayed against
// the lease model (internal/testing/model/lease, Conform): every step the leaders,
// the clients and the log took must be one the model allows from the
// states the previous steps reached — trace validation. The package
// documentation of lease (Conform) says what is projected onto the model
// and what is not checked.
const CheckModel = "model-conformance"

// ModelStats are the figures of the model-conformance check.
type ModelStats struct {
	Sessions int `json:"sessions"`
	Replays  int `json:"replays"`
	Steps    int `json:"steps"`
	// Unchecked counts replays that stopped before their end, by reason
	// (the run left the model's scope).
	Unchecked map[string]int `json:"unchecked,omitempty"`
	Millis    int            `json:"ms"`
}

// checkModel replays the lease trace against the model.
func (c *checker) checkModel() {
	h := c.h
	if len(h.LeaseTrace) == 0 {
		return // the multi-process layer records none
	}
	et := time.Duration(h.ElectionTimeout)
	rep, err := lease.Conform(h.LeaseTrace, lease.ConformConfig{TTL: time.Duration(h.TTL), ElectionTimeout: et})
	if err != nil {
		c.fail("harness", "", "model conformance: %v", err)
		return
	}
	c.r.Model = ModelStats{Sessions: rep.Sessions, Replays: rep.Replays, Steps: rep.Steps, Unchecked: rep.Unchecked, Millis: int(rep.Elapsed.Milliseconds())}
	sort.SliceStable(rep.Mismatches, func(i, j int) bool { return rep.Mismatches[i].At < rep.Mismatches[j].At })
	for _, m := range rep.Mismatches {
		c.fail(CheckModel, m.Lock, "%s (at %s)", m, time.Duration(m.At-h.Start))
	}
}

// add sums o into m (a summary's totals).
func (m *ModelStats) add(o ModelStats) {
	m.Sessions += o.Sessions
	m.Replays += o.Replays
	m.Steps += o.Steps
	m.Millis += o.Millis
	for k, v := range o.Unchecked {
		if m.Unchecked == nil {
			m.Unchecked = map[string]int{}
		}
		m.Unchecked[k] += v
	}
}

// stopped counts the replays that stopped out of the model's scope.
func (m ModelStats) stopped() int {
	n := 0
	for _, v := range m.Unchecked {
		n += v
	}
	return n
}
