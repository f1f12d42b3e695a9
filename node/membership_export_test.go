package node

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Helpers for the external tests: they read a node's metrics without a
// Registerer (registering one bridges hashicorp's process-wide go-metrics to
// Prometheus, which does not mix with synctest bubbles).

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// MembershipConflicts returns the node's membership_conflicts_total{reason}.
func MembershipConflicts(n *Node, reason string) float64 {
	return counterValue(n.metrics.memberConflicts.WithLabelValues(reason))
}

// MembershipChanges returns the node's membership_changes_total{action,result}.
func MembershipChanges(n *Node, action, result string) float64 {
	return counterValue(n.metrics.memberChanges.WithLabelValues(action, result))
}

// GrantAnnouncements returns the node's grant_announcements_total{outcome}.
func GrantAnnouncements(n *Node, outcome string) float64 {
	return counterValue(n.metrics.announcements.WithLabelValues(outcome))
}

// The node's collectors, the membership ones included, register together.
func TestMetricsRegister(t *testing.T) {
	m := newMetrics(&Node{})
	reg := prometheus.NewRegistry()
	for _, c := range m.all() {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	m.memberConflicts.WithLabelValues("address").Inc()
	only := prometheus.NewRegistry() // gathering the rest needs a running node
	only.MustRegister(m.memberConflicts, m.memberChanges, m.gossipJoins)
	for _, g := range m.gauges {
		if d := <-describe(g); strings.Contains(d.String(), `"raftlock_node_members"`) {
			only.MustRegister(g)
		}
	}
	mfs, err := only.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]int{}
	for _, mf := range mfs {
		found[mf.GetName()] = len(mf.GetMetric())
	}
	// Every conflict reason's series exists from the start (initLabels).
	if found["raftlock_node_members"] != 4 || found["raftlock_node_membership_conflicts_total"] < 2 ||
		counterValue(m.memberConflicts.WithLabelValues("address")) != 1 {
		t.Fatalf("gathered %v", found)
	}
}

func describe(c prometheus.Collector) <-chan *prometheus.Desc {
	ch := make(chan *prometheus.Desc, 1)
	c.Describe(ch)
	return ch
}

// WithDefaults is Config.withDefaults, for the external tests.
func WithDefaults(c Config) Config { return c.withDefaults() }

// AskLeave sends, from n, the decommission request of raftID to addr (as
// Leave does for the node's own Raft id): the leader's answer.
func AskLeave(ctx context.Context, n *Node, addr, raftID string) (ok bool, reason string, err error) {
	var r joinReply
	err = n.callMembership(ctx, addr, opLeave, leaveMsg{RaftID: raftID}, &r)
	return r.OK, r.Reason, err
}

// Forwards returns how many requests n sent to a leader (forwards_total,
// every outcome).
func Forwards(n *Node) float64 {
	var sum float64
	for _, o := range []string{"ok", "timeout", "closed", "error"} {
		sum += counterValue(n.metrics.forwards.WithLabelValues(o))
	}
	return sum
}
