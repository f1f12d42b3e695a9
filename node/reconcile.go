package node

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/gossip"
	"github.com/raftlock/raftlock/internal/membership"
)

// The leader's reconciler keeps the Raft configuration in line with the
// members it can see and prove: it probes every server and every candidate
// over the Raft/RPC port, gathers the planner's input (gossip members, or
// static join requests; the probes' health; the configuration) and makes
// the one change membership.PlanMembership decides, waits for it to
// commit, and looks again. Only the leader's reconciler changes the
// configuration. (hashicorp/raft v1.7.3 does not report the configuration's
// index through GetConfiguration, so changes are made with prevIndex 0; the
// single writer makes the check moot: see membership.Execute.)

// Reconciler tuning.
const (
	// maxCatchUpLag: a server more entries behind the leader's last index
	// than this is not healthy (not promoted; counts as unhealthy in guards).
	maxCatchUpLag = 256
	// maxReconcileSteps bounds the changes made in one round.
	maxReconcileSteps = 16
)

// reconciler is the leader-side membership loop's state.
type reconciler struct {
	n    *Node
	poke chan struct{}

	mu       sync.Mutex
	health   map[string]membership.Health // Raft id → probes
	verified map[string]verification      // Raft id + "@" + address → proven identity
	missing  map[string]time.Time         // configured, unknown to gossip: since
	leaving  map[string]time.Time         // Raft id → decommission requested (static mode, or through the RPC)
	removed  map[string]time.Time         // Raft id → when this node, as leader, committed its removal (removedByUs)
	removing map[string]time.Time         // Raft id → an operator's RemovePeer (admin_members.go)
	lastAdd  time.Time
	reported map[string]bool
}

func newReconciler(n *Node) *reconciler {
	return &reconciler{n: n, poke: make(chan struct{}, 1), health: map[string]membership.Health{}, verified: map[string]verification{},
		missing: map[string]time.Time{}, leaving: map[string]time.Time{}, removed: map[string]time.Time{}, reported: map[string]bool{}}
}

// wakeReconciler makes the leader look at membership again at once.
func (n *Node) wakeReconciler() {
	select {
	case n.reconciler.poke <- struct{}{}:
	default:
	}
}

// interval is how often the reconciler probes and plans when nothing
// pokes it.
func (r *reconciler) interval() time.Duration {
	if r.n.cfg.gossipOn() {
		return 2 * r.n.cfg.gossipTiming().ProbeInterval
	}
	return 4 * r.n.cfg.Timing.HeartbeatTimeout
}

// addInterval is the least time between two additions (strangers cannot
// flood the configuration, even with the gossip key).
func (r *reconciler) addInterval() time.Duration { return 2 * r.interval() }

// lead reconciles while this node leads (until ctx ends).
func (r *reconciler) lead(ctx context.Context) {
	r.mu.Lock()
	r.health, r.missing, r.lastAdd = map[string]membership.Health{}, map[string]time.Time{}, time.Time{}
	r.mu.Unlock()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-r.poke:
		}
		next := r.round(ctx)
		timer.Reset(max(time.Until(next), r.interval()/8))
	}
}

// round probes, then makes the changes that are due, one at a time; it
// returns when to look again.
func (r *reconciler) round(ctx context.Context) time.Time {
	conf, ok := r.n.latestConfig()
	if !ok {
		return time.Now().Add(r.interval())
	}
	members := r.members(time.Now())
	r.probe(ctx, conf, members)
	for range maxReconcileSteps {
		now := time.Now()
		if ctx.Err() != nil {
			return now.Add(r.interval())
		}
		if conf, ok = r.n.latestConfig(); !ok {
			return now.Add(r.interval())
		}
		in := r.input(now, conf, members)
		p := membership.PlanMembership(in)
		for _, nt := range p.Notes {
			r.report(ctx, nt)
		}
		if p.Action == nil {
			next := now.Add(r.interval())
			if !p.Next.IsZero() && p.Next.Before(next) {
				next = p.Next
			}
			return next
		}
		if err := r.apply(*p.Action); err != nil {
			return time.Now().Add(r.n.cfg.Timing.ElectionTimeout)
		}
		members = r.members(time.Now())
	}
	return time.Now()
}

// members gathers the members the leader knows, by node id: gossip members,
// or (static) recent join requests; and decommissions requested by RPC.
func (r *reconciler) members(now time.Time) map[string]membership.Member {
	out := map[string]membership.Member{}
	if g := r.n.members; g != nil {
		for id, v := range g.View(now) {
			out[id] = membership.Member{NodeID: id, RaftID: v.Meta.EffectiveRaftID(), Addr: v.Addr, ClusterID: v.Meta.Cluster,
				State: membership.State(v.State), Since: v.Since, Leaving: v.Meta.Leaving, HasState: v.Meta.State}
		}
	} else {
		for _, j := range r.n.joins.recent(now, 4*r.interval()) {
			out[j.msg.NodeID] = membership.Member{NodeID: j.msg.NodeID, RaftID: j.msg.RaftID, Addr: j.msg.Addr, ClusterID: j.msg.ClusterID,
				State: membership.Alive, Since: j.seen}
		}
	}
	r.mu.Lock()
	for rid, since := range r.leaving {
		id := membership.NodeOf(raft.ServerID(rid))
		switch m, ok := out[id]; {
		case ok && m.RaftID == rid:
			m.Leaving = true
			out[id] = m
		case !ok:
			// The node asked itself (its RPC is the proof) and is in no
			// other source: a founder of a static cluster never sent a
			// join request, and gossip may not show it (yet).
			out[id] = membership.Member{NodeID: id, RaftID: rid, State: membership.Alive, Since: since, Leaving: true}
		}
	}
	r.mu.Unlock()
	r.adminRemovals(out)
	return out
}

// input builds the planner's input.
func (r *reconciler) input(now time.Time, conf raft.Configuration, members map[string]membership.Member) membership.Input {
	id := r.n.ident()
	cfg := &r.n.cfg
	in := membership.Input{Self: id.RaftID, ClusterID: id.ClusterID, ClusterVersion: r.n.clusterVersion(), Now: now, Members: map[string]membership.Member{},
		Health: map[string]membership.Health{}, Missing: map[string]time.Time{}, Gossip: cfg.gossipOn(),
		MaxVoters: cfg.maxVoters(), MaxNonvoters: cfg.MaxNonvoters, ReapTimeout: cfg.reapTimeout(), Stabilization: cfg.Stabilization,
		AddInterval: r.addInterval()}
	r.mu.Lock()
	defer r.mu.Unlock()
	in.LastAdd = r.lastAdd
	seen := map[string]bool{}
	for _, s := range conf.Servers {
		rid := string(s.ID)
		seen[rid] = true
		in.Servers = append(in.Servers, membership.Server{RaftID: rid, NodeID: membership.NodeOf(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
		if h, ok := r.health[rid]; ok {
			in.Health[rid] = h
		}
		if m, ok := members[membership.NodeOf(s.ID)]; ok && m.RaftID == rid {
			delete(r.missing, rid)
		} else if _, ok := r.missing[rid]; !ok {
			r.missing[rid] = now
		}
	}
	for rid := range r.missing {
		if !seen[rid] {
			delete(r.missing, rid)
		}
	}
	for rid, t := range r.missing {
		in.Missing[rid] = t
	}
	for rid := range r.leaving {
		if !seen[rid] {
			delete(r.leaving, rid)
		}
	}
	for id, m := range members {
		v, ok := r.verified[m.RaftID+"@"+m.Addr]
		m.Verified, m.MaxVersion = ok, v.maxVersion
		in.Members[id] = m
	}
	// Without gossip the probes are the liveness source of the servers.
	if !in.Gossip {
		for _, s := range in.Servers {
			if _, ok := in.Members[s.NodeID]; ok || s.RaftID == in.Self {
				continue
			}
			h := in.Health[s.RaftID]
			m := membership.Member{NodeID: s.NodeID, RaftID: s.RaftID, Addr: s.Addr, State: membership.Alive, HasState: true, Verified: true}
			if !h.Down.IsZero() {
				m.State, m.Since = membership.Dead, h.Down
			}
			in.Members[s.NodeID] = m
		}
	}
	return in
}

// report logs and counts a refusal once per key, and tells the refused node.
func (r *reconciler) report(ctx context.Context, nt membership.Note) {
	r.mu.Lock()
	k := nt.Reason + "|" + nt.Key
	seen := r.reported[k]
	r.reported[k] = true
	if len(r.reported) > 4096 {
		r.reported = map[string]bool{k: true}
	}
	r.mu.Unlock()
	if seen {
		return
	}
	switch nt.Reason {
	case "reap_refused", "leave_refused", "replace_refused":
		action := map[string]membership.ActionKind{"reap_refused": membership.Reap, "leave_refused": membership.RemoveLeaving, "replace_refused": membership.Replace}[nt.Reason]
		r.n.metrics.memberChanges.WithLabelValues(string(action), "refused").Inc()
		r.n.log.Warn(nt.Msg, nt.Args...)
	default:
		r.n.metrics.memberConflicts.WithLabelValues(nt.Reason).Inc()
		r.n.log.Warn(nt.Msg, append([]any{"reason", nt.Reason}, nt.Args...)...)
	}
	r.n.refusals.add(nt.Reason, noteDetail(nt.Msg, nt.Args), nt.Key)
	if nt.Notify == "" {
		return
	}
	msg := gossip.Refusal{Reason: nt.Reason, Detail: nt.Msg, By: r.n.cfg.ID}
	if g := r.n.members; g != nil && nt.Member != "" && g.Notify(nt.Member, msg) {
		return // through gossip: reaches the member even if its Raft address is another's
	}
	r.n.wg.Add(1)
	go func() {
		defer r.n.wg.Done()
		cctx, cancel := context.WithTimeout(r.n.ctx, r.n.cfg.AttemptTimeout)
		defer cancel()
		var ack struct{}
		if err := r.n.callMembership(cctx, nt.Notify, opRefused, msg, &ack); err != nil {
			r.n.log.Debug("could not tell a refused node why", "addr", nt.Notify, "err", err)
		}
	}()
}

// apply makes one configuration change and waits until it is committed (or
// fails: leadership lost, shutdown).
func (r *reconciler) apply(a membership.Action) error {
	f, err := membership.Execute(r.n.raft, a, r.n.cfg.AttemptTimeout)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if err := f.Error(); err != nil {
		r.n.metrics.memberChanges.WithLabelValues(string(a.Kind), "error").Inc()
		r.n.log.Warn("membership change failed; will retry", "action", a.Kind, "member", a.NodeID, "raft_id", a.RaftID, "addr", a.Addr, "err", err)
		return err
	}
	r.mu.Lock()
	switch a.Kind {
	case membership.AddNonvoter, membership.UpdateAddr, membership.RemoveLeaving, membership.Replace, membership.Reap:
		// A new (or moved, or gone) server: what the probes said of it
		// before no longer holds.
		delete(r.health, a.RaftID)
		delete(r.missing, a.RaftID)
	}
	if a.Kind == membership.AddNonvoter {
		r.lastAdd = time.Now()
	}
	switch a.Kind {
	case membership.RemoveLeaving, membership.Replace, membership.Reap:
		r.recordRemovedLocked(a.RaftID, time.Now())
	}
	r.mu.Unlock()
	r.n.metrics.memberChanges.WithLabelValues(string(a.Kind), "ok").Inc()
	r.n.log.Info("membership change", "action", a.Kind, "member", a.NodeID, "raft_id", a.RaftID, "addr", a.Addr, "why", a.Why, "index", f.Index())
	return nil
}

// maxRemovedRecords bounds the removals a leader remembers (removedByUs).
const maxRemovedRecords = 256

// recordRemovedLocked remembers that this node committed raftID's removal,
// forgetting the oldest record beyond maxRemovedRecords.
func (r *reconciler) recordRemovedLocked(raftID string, at time.Time) {
	r.removed[raftID] = at
	for len(r.removed) > maxRemovedRecords {
		oldest, first := "", time.Time{}
		for id, t := range r.removed {
			if oldest == "" || t.Before(first) {
				oldest, first = id, t
			}
		}
		delete(r.removed, oldest)
	}
}

// removedByUs reports whether this node, as leader, committed raftID's
// removal (a decommission, replacement or reap).
func (r *reconciler) removedByUs(raftID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.removed[raftID]
	return ok
}

// requestLeave records that a server decommissions (static mode, or a Leave
// RPC): the planner removes it as soon as the guard allows.
func (r *reconciler) requestLeave(raftID string) {
	r.mu.Lock()
	r.leaving[raftID] = time.Now()
	r.mu.Unlock()
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

// noteDetail renders a membership note for people (the refusals a status
// shows): its message, then its slog-style key-value arguments as
// key=value, a value with spaces or quotes quoted:
// "not adding member yet: … (member=r3 addr=10.0.0.3:7400)".
func noteDetail(msg string, args []any) string {
	if len(args) == 0 {
		return msg
	}
	var b strings.Builder
	b.WriteString(msg)
	b.WriteString(" (")
	for i := 0; i < len(args); i += 2 {
		if i > 0 {
			b.WriteByte(' ')
		}
		if i+1 == len(args) { // a value without a key, as slog's !BADKEY
			fmt.Fprintf(&b, "%v", args[i])
			break
		}
		v := fmt.Sprint(args[i+1])
		if v == "" || strings.ContainsAny(v, " \t\"=") {
			v = strconv.Quote(v)
		}
		fmt.Fprintf(&b, "%v=%s", args[i], v)
	}
	b.WriteByte(')')
	return b.String()
}
