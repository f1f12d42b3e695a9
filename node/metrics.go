package node

import (
	"errors"
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/gossip"
	"github.com/raftlock/raftlock/internal/replica"
)

// metrics of one node. They always exist (so that code paths do not branch);
// they are exposed only if Config.Registerer is set.
type metrics struct {
	commitLatency   prometheus.Histogram
	batchSize       prometheus.Histogram
	commits         *prometheus.CounterVec
	forwards        *prometheus.CounterVec
	announcements   *prometheus.CounterVec
	keepalives      *prometheus.CounterVec
	grants          prometheus.Counter
	releases        *prometheus.CounterVec
	expiries        prometheus.Counter
	expiryProposals prometheus.Counter
	leaderChanges   prometheus.Counter
	eventDrops      prometheus.Counter
	memberConflicts *prometheus.CounterVec
	memberChanges   *prometheus.CounterVec
	gossipJoins     *prometheus.CounterVec
	votesRefused    prometheus.Counter
	gauges          []prometheus.Collector

	// State machine versions, quotas and lock-delays (see initFSM).
	quotaRefusals *prometheus.CounterVec
	delayEnds     *prometheus.CounterVec
	fsmGauges     []prometheus.Collector
}

func newMetrics(n *Node) *metrics {
	const ns, sub = "raftlock", "node"
	m := &metrics{
		commitLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "apply_duration_seconds",
			Help: "Leader: time from raft Apply of a batch entry to its application.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "batch_commands",
			Help: "Leader: commands per group-commit log entry.", Buckets: prometheus.ExponentialBuckets(1, 2, 13)}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "batches_total",
			Help: "Leader: batch entries proposed, by outcome."}, []string{"outcome"}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "forwards_total",
			Help: "Follower: RPCs forwarded to the leader, by outcome."}, []string{"outcome"}),
		announcements: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "grant_announcements_total",
			Help: "Leader: notices of hand-off grants sent to other replicas, by outcome."}, []string{"outcome"}),
		keepalives: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "keepalives_total",
			Help: "Keepalives handled, by result (ok, expired, no_quorum, error)."}, []string{"result"}),
		grants: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "grants_total",
			Help: "Locks granted (applied on this replica)."}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "releases_total",
			Help: "Locks released (applied on this replica), by reason."}, []string{"reason"}),
		expiries: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "session_expiries_total",
			Help: "Sessions expired (applied on this replica)."}),
		expiryProposals: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "session_expiries_proposed_total",
			Help: "Leader: sessions this node expired as leader."}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "leadership_changes_total",
			Help: "Leader changes this node saw (each new leader it learned of, itself included; as a follower too)."}),
		eventDrops: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "event_drops_total",
			Help: "Events dropped because a subscriber was slow (it was told to resync)."}),
		memberConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "membership_conflicts_total",
			Help: "Members refused, by reason (duplicate_id, address, protocol, metadata, bootstrap_expect); each distinct conflict counts once."}, []string{"reason"}),
		memberChanges: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "membership_changes_total",
			Help: "Leader: Raft configuration changes made by membership reconciliation, by action and result (ok, error, refused)."}, []string{"action", "result"}),
		gossipJoins: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "gossip_joins_total",
			Help: "Attempts to join the gossip cluster through the seeds, by result."}, []string{"result"}),
		votesRefused: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "votes_refused_total",
			Help: "Vote requests refused because this node's incarnation is not (yet) a voter of its configuration."}),
	}
	gauge := func(name, help string, f func() float64) {
		m.gauges = append(m.gauges, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, f))
	}
	raftUp := func(f func() float64) func() float64 {
		return func() float64 {
			if !n.started.Load() {
				return 0
			}
			return f()
		}
	}
	gauge("is_leader", "1 if this node is the Raft leader.", raftUp(func() float64 { return b2f(n.IsLeader()) }))
	gauge("term", "Current Raft term.", raftUp(func() float64 { return float64(n.raft.CurrentTerm()) }))
	gauge("commit_index", "Raft commit index.", raftUp(func() float64 { return float64(n.raft.CommitIndex()) }))
	gauge("applied_index", "Index applied by the local FSM.", func() float64 { return float64(n.applied.get()) })
	gauge("last_contact_seconds", "Follower: seconds since the leader was last heard.", raftUp(func() float64 {
		if n.IsLeader() || n.raft.LastContact().IsZero() {
			return 0
		}
		return time.Since(n.raft.LastContact()).Seconds()
	}))
	gauge("sessions", "Live sessions.", func() float64 { return float64(n.fsm.Stats().Sessions) })
	gauge("locks_held", "Locks with a holder.", func() float64 { return float64(n.fsm.Stats().Held) })
	gauge("waiters", "Queued acquisitions over all locks and semaphores.", func() float64 { return float64(n.fsm.Stats().Waiters) })
	gauge("last_token", "Last fencing token granted.", func() float64 { return float64(n.fsm.Stats().LastToken) })
	for _, st := range []MemberState{MemberAlive, MemberSuspect, MemberDead, MemberLeft} {
		m.gauges = append(m.gauges, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "members",
			Help: "Gossip members known to this node, by state.", ConstLabels: prometheus.Labels{"state": string(st)}}, func() float64 {
			if mb := n.members; mb != nil {
				return mb.CountMembers(gossip.State(st))
			}
			return 0
		}))
	}
	m.initFSM(n)
	m.initLabels() // metrics_init.go
	return m
}

// initFSM creates the metrics of the state machine's versions, quotas and
// lock-delays. Labelled series exist from registration on.
func (m *metrics) initFSM(n *Node) {
	const ns, sub = "raftlock", "node"
	m.quotaRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "quota_refusals_total",
		Help: "Leader: commands refused by a replicated quota (fsm.StatusQuota), by quota."}, []string{"quota"})
	for _, q := range fsmwire.Quotas() {
		m.quotaRefusals.WithLabelValues(q.String())
	}
	m.delayEnds = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "lock_delay_ends_total",
		Help: "Leader: lock-delays ended on its monotonic clock (EndDelay proposals), by result (ok, error)."}, []string{"result"})
	for _, r := range []string{"ok", "error"} {
		m.delayEnds.WithLabelValues(r)
	}
	gauge := func(name, help string, f func() float64) {
		m.fsmGauges = append(m.fsmGauges, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, f))
	}
	gauge("fsm_halted", "1 if the state machine halted on an entry or snapshot of an unknown version (the node serves nothing; upgrade and restart it).",
		func() float64 { return b2f(n.fsm.Halted() != nil) })
	gauge("cluster_version", "The cluster version in force (the log's; 1 until every server supports 2).",
		func() float64 { return float64(n.fsm.ClusterVersion()) })
	gauge("max_cluster_version", "The highest cluster version this binary supports.",
		func() float64 { return float64(n.maxVersion()) })
	m.initGrantGauges(n)
}

// countQuota counts a result refused by a quota.
func (m *metrics) countQuota(r fsm.Result) {
	if r.Status == fsmwire.StatusQuota {
		m.quotaRefusals.WithLabelValues(r.Quota.String()).Inc()
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (m *metrics) all() []prometheus.Collector {
	return append([]prometheus.Collector{m.commitLatency, m.batchSize, m.commits, m.forwards, m.announcements, m.keepalives, m.grants,
		m.releases, m.expiries, m.expiryProposals, m.leaderChanges, m.eventDrops, m.memberConflicts, m.memberChanges, m.gossipJoins, m.votesRefused,
		m.quotaRefusals, m.delayEnds}, append(m.gauges, m.fsmGauges...)...)
}

func (m *metrics) register(r prometheus.Registerer) error {
	if r == nil {
		return nil
	}
	for _, c := range m.all() {
		if err := r.Register(c); err != nil {
			var dup prometheus.AlreadyRegisteredError
			if errors.As(err, &dup) {
				return errors.New("node: metrics already registered: give each node in a process its own Registerer")
			}
			return err
		}
	}
	return nil
}

func (m *metrics) unregister(r prometheus.Registerer) {
	if r == nil {
		return
	}
	for _, c := range m.all() {
		r.Unregister(c)
	}
}

func (m *metrics) observeCommit(d time.Duration, n int, err error) {
	m.commitLatency.Observe(d.Seconds())
	m.batchSize.Observe(float64(n))
	if err != nil {
		m.commits.WithLabelValues("error").Inc()
	} else {
		m.commits.WithLabelValues("ok").Inc()
	}
}

func (m *metrics) observeEvents(events []fsm.Event) {
	for _, e := range events {
		switch e.Kind {
		case fsmwire.EventGranted:
			m.grants.Inc()
		case fsmwire.EventReleased:
			m.releases.WithLabelValues(e.Reason.String()).Inc()
		case fsmwire.EventSessionExpired:
			m.expiries.Inc()
		}
	}
}

func (m *metrics) countKeepAlive(err error) {
	switch {
	case err == nil:
		m.keepalives.WithLabelValues("ok").Inc()
	case errors.Is(err, replica.ErrSessionExpired):
		m.keepalives.WithLabelValues("expired").Inc()
	case errors.Is(err, ErrNoQuorum):
		m.keepalives.WithLabelValues("no_quorum").Inc()
	default:
		m.keepalives.WithLabelValues("error").Inc()
	}
}

var bridgeOnce sync.Once

// EnableRaftMetrics sends hashicorp/raft's own metrics (raft_*: commit and
// apply times, replication, FSM and snapshot timings) to r. They go through
// go-metrics, a process-wide global, so this is a process-wide switch: call
// it once, at start-up; later calls do nothing. The node's own metrics
// (Config.Registerer) do not need it.
func EnableRaftMetrics(r prometheus.Registerer) error {
	var err error
	bridgeOnce.Do(func() {
		var sink *gmprom.PrometheusSink
		sink, err = gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: r, Name: "raftlock_raft_sink", Expiration: time.Minute})
		if err != nil {
			return
		}
		cfg := gometrics.DefaultConfig("raftlock")
		cfg.EnableHostname = false
		cfg.EnableRuntimeMetrics = false
		_, err = gometrics.NewGlobal(cfg, sink)
	})
	return err
}
