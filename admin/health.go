package admin

import (
	"fmt"
	"time"

	"github.com/raftlock/raftlock/node"
)

// HealthJSON is a node's health as an operator should read it: whether it
// serves (Ready, and if not, why), what deserves attention (Warnings), and
// how many more failures the cluster survives.
type HealthJSON struct {
	Ready    bool     `json:"ready"`
	Reasons  []string `json:"reasons"`  // why it is not ready
	Warnings []string `json:"warnings"` // what else an operator should look at
	// Fault tolerance of the configuration as this node sees it: voters,
	// voters up (answering, or alive in gossip when not probed), the
	// quorum, and how many more voters may fail before grants stop
	// (negative: grants have stopped).
	Voters         int    `json:"voters"`
	VotersUp       int    `json:"voters_up"`
	Quorum         int    `json:"quorum"`
	Tolerates      int    `json:"tolerates"`
	FaultTolerance string `json:"fault_tolerance"` // the sentence the page shows
}

// Readiness thresholds.
const (
	// maxApplyLag: a node whose state machine is more entries behind its
	// commit index than this is not caught up.
	maxApplyLag = 256
	// contactTimeouts: a follower that has not heard from its leader for
	// this many election timeouts does not count its leader as known.
	contactTimeouts = 3
	// refusalRecent: refusals newer than this are warnings.
	refusalRecent = 10 * time.Minute
)

// assess decides a node's health from its status and (if probed) what the
// servers say of themselves. Pure: table-tested in health_test.go.
func assess(st node.Status, peers []node.PeerStatus, t node.Timing, now time.Time) HealthJSON {
	h := HealthJSON{Reasons: []string{}, Warnings: []string{}}
	switch {
	case st.Halted != "":
		h.Reasons = append(h.Reasons, "state machine halted: "+public(st.Halted))
	case st.State == "shutdown":
		h.Reasons = append(h.Reasons, "the node is shut down")
	case len(st.Servers) == 0:
		r := "in no cluster yet"
		if st.Formation != "" {
			r += ": " + public(st.Formation)
		}
		h.Reasons = append(h.Reasons, r)
	case st.LeaderID == "":
		h.Reasons = append(h.Reasons, "no leader known (election in progress, or no quorum)")
	case st.State == "follower" && st.LastContact > contactTimeouts*t.ElectionTimeout:
		h.Reasons = append(h.Reasons, fmt.Sprintf("no contact with the leader %s for %v", st.LeaderID, st.LastContact.Round(time.Millisecond)))
	case !st.Ready:
		h.Reasons = append(h.Reasons, "not caught up with the log yet")
	case st.CommitIndex > st.AppliedIndex+maxApplyLag:
		h.Reasons = append(h.Reasons, fmt.Sprintf("applying the log: %d entries behind", st.CommitIndex-st.AppliedIndex))
	}
	h.Ready = len(h.Reasons) == 0

	if st.GossipErr != "" {
		h.Warnings = append(h.Warnings, "gossip: "+public(st.GossipErr))
	}
	if st.JoinErr != "" {
		h.Warnings = append(h.Warnings, "join: "+public(st.JoinErr))
	}
	if st.Formation != "" && len(st.Servers) > 0 {
		h.Warnings = append(h.Warnings, "formation: "+public(st.Formation))
	}
	h.faultTolerance(st, peers)
	for _, r := range st.Refusals {
		if now.Sub(r.Last) < refusalRecent {
			h.Warnings = append(h.Warnings, fmt.Sprintf("refused (%s): %s", r.Reason, public(r.Detail)))
		}
	}
	return h
}

// faultTolerance counts the voters up and says what one more failure does.
func (h *HealthJSON) faultTolerance(st node.Status, peers []node.PeerStatus) {
	probed := map[string]node.PeerStatus{}
	for _, p := range peers {
		probed[p.ID] = p
	}
	gossip := map[string]node.MemberState{}
	for _, m := range st.Members {
		gossip[m.ID] = m.State
	}
	for _, sv := range st.Servers {
		p, wasProbed := probed[sv.ID]
		if wasProbed && p.Reachable && p.Lag > maxApplyLag {
			h.Warnings = append(h.Warnings, fmt.Sprintf("%s is %d entries behind", sv.ID, p.Lag))
		}
		if sv.Role != node.RoleVoter {
			continue
		}
		h.Voters++
		up := false
		switch {
		case sv.ID == st.ID:
			up = st.Halted == "" && st.State != "shutdown"
		case wasProbed:
			up = p.Reachable && p.Halted == ""
			if !p.Reachable {
				h.Warnings = append(h.Warnings, fmt.Sprintf("voter %s does not answer: %s", sv.ID, public(p.Err)))
			} else if p.Halted != "" {
				h.Warnings = append(h.Warnings, fmt.Sprintf("voter %s halted: %s", sv.ID, public(p.Halted)))
			}
		default:
			state, known := gossip[sv.ID]
			up = !known || state == node.MemberAlive || state == node.MemberSuspect
			if known && !up {
				h.Warnings = append(h.Warnings, fmt.Sprintf("voter %s is %s in gossip", sv.ID, state))
			}
		}
		if up {
			h.VotersUp++
		}
	}
	if h.Voters == 0 {
		h.FaultTolerance = "no voters known"
		return
	}
	h.Quorum = h.Voters/2 + 1
	h.Tolerates = h.VotersUp - h.Quorum
	switch {
	case h.Tolerates < 0:
		h.FaultTolerance = fmt.Sprintf("%d of %d voters up: no quorum — no lock is granted or renewed until %d more come back", h.VotersUp, h.Voters, -h.Tolerates)
		h.Warnings = append(h.Warnings, h.FaultTolerance)
	case h.Tolerates == 0:
		h.FaultTolerance = fmt.Sprintf("%d of %d voters up: one more failure stops all grants", h.VotersUp, h.Voters)
		h.Warnings = append(h.Warnings, h.FaultTolerance)
	case h.Tolerates == 1:
		h.FaultTolerance = fmt.Sprintf("%d of %d voters up: survives one more failure", h.VotersUp, h.Voters)
	default:
		h.FaultTolerance = fmt.Sprintf("%d of %d voters up: survives %d more failures", h.VotersUp, h.Voters, h.Tolerates)
	}
}
