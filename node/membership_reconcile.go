package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// Leader-only reconciliation of the Raft configuration with the gossip
// members. One change at a time, each decided on the latest configuration
// after the previous one committed; only the leader's reconciler changes the
// configuration. (hashicorp/raft v1.7.3 does not report the configuration's
// index through GetConfiguration, so changes are made with prevIndex 0; the
// single writer makes the check moot.)

type actionKind string

const (
	actAddVoter    actionKind = "add_voter"
	actAddNonvoter actionKind = "add_nonvoter"
	actPromote     actionKind = "promote"
	actDemote      actionKind = "demote"
	actRemoveLeft  actionKind = "remove_left"
	actReap        actionKind = "reap"
	actUpdateAddr  actionKind = "update_address"
)

type planServer struct {
	ID, Addr string
	Voter    bool
}

type planInput struct {
	Self        string
	Now         time.Time
	Servers     []planServer          // the latest Raft configuration
	Members     map[string]memberView // gossip members
	Missing     map[string]time.Time  // configured servers gossip does not know, since when
	MaxVoters   int
	ReapTimeout time.Duration
}

type planAction struct {
	Kind     actionKind
	ID, Addr string
	Voter    bool // update_address: keep it a voter
	Why      string
}

// planNote is a refusal to report (deduplicated by Reason and Key).
type planNote struct {
	Reason string // a conflict reason ("address", "duplicate_id") or "reap_refused"
	Key    string
	Msg    string
	Args   []any
}

type plan struct {
	Action *planAction // the next change; nil: nothing to do now
	Notes  []planNote
	Next   time.Time // the earliest reap deadline still ahead (zero: none)
}

func quorum(voters int) int { return voters/2 + 1 }

// planMembership decides the next configuration change, in this order:
// remove members that left (or are leaving); reap failed members after the
// reap timeout, but never a voter when that would leave fewer voters than a
// quorum of the configuration or fewer healthy voters than a quorum of what
// remains; move a restarted member to its new address; add alive members
// (voters up to MaxVoters, non-voters beyond); promote healthy non-voters
// while voters are fewer than MaxVoters; demote voters beyond MaxVoters.
// Members whose Raft address another member or server uses, and fresh nodes
// reusing a configured id at another address, are refused (Notes).
func planMembership(in planInput) plan {
	var p plan
	servers := slices.Clone(in.Servers)
	slices.SortFunc(servers, func(a, b planServer) int { return strings.Compare(a.ID, b.ID) })
	inConf := map[string]planServer{}
	addrOwner := map[string]string{}
	voters := 0
	for _, s := range servers {
		inConf[s.ID] = s
		addrOwner[s.Addr] = s.ID
		if s.Voter {
			voters++
		}
	}
	healthy := func(id string) bool {
		if id == in.Self {
			return true
		}
		v, ok := in.Members[id]
		return ok && v.State == MemberAlive && !v.Meta.Leaving
	}
	live := func(v memberView) bool {
		return (v.State == MemberAlive || v.State == MemberSuspect) && !v.Meta.Leaving
	}

	// 1. Graceful leaves.
	for _, s := range servers {
		if v, ok := in.Members[s.ID]; ok && s.ID != in.Self && (v.State == MemberLeft || v.Meta.Leaving) {
			p.Action = &planAction{Kind: actRemoveLeft, ID: s.ID, Addr: s.Addr, Why: "left the cluster"}
			return p
		}
	}

	// 2. Failed members, after the reap timeout.
	for _, s := range servers {
		if s.ID == in.Self {
			continue
		}
		v, known := in.Members[s.ID]
		var since time.Time
		switch {
		case !known:
			if since = in.Missing[s.ID]; since.IsZero() {
				since = in.Now
			}
		case v.State == MemberDead:
			since = v.Since
		default:
			continue
		}
		due := since.Add(in.ReapTimeout)
		if in.Now.Before(due) {
			if p.Next.IsZero() || due.Before(p.Next) {
				p.Next = due
			}
			continue
		}
		if s.Voter {
			after, healthyAfter := voters-1, 0
			for _, t := range servers {
				if t.Voter && t.ID != s.ID && healthy(t.ID) {
					healthyAfter++
				}
			}
			if after < quorum(voters) || healthyAfter < quorum(after) {
				p.Notes = append(p.Notes, planNote{Reason: "reap_refused", Key: s.ID + "|" + since.String(),
					Msg:  "not removing a failed voter: too few voters (or healthy voters) would remain for a quorum",
					Args: []any{"member", s.ID, "failed_since", since, "voters", voters, "healthy_voters_after", healthyAfter}})
				continue
			}
		}
		p.Action = &planAction{Kind: actReap, ID: s.ID, Addr: s.Addr, Why: fmt.Sprintf("failed since %s (reap timeout %v)", since.Format(time.RFC3339Nano), in.ReapTimeout)}
		return p
	}

	// 3. New addresses and new members.
	ids := make([]string, 0, len(in.Members))
	byAddr := map[string][]string{}
	for id, v := range in.Members {
		ids = append(ids, id)
		if live(v) {
			byAddr[v.Addr] = append(byAddr[v.Addr], id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		v := in.Members[id]
		if id == in.Self || !live(v) {
			continue
		}
		s, configured := inConf[id]
		if configured && s.Addr == v.Addr {
			continue
		}
		if owner, ok := addrOwner[v.Addr]; ok && owner != id {
			p.Notes = append(p.Notes, planNote{Reason: "address", Key: id + "|" + v.Addr + "|" + owner,
				Msg:  "refusing member: its Raft address belongs to another server of the configuration",
				Args: []any{"member", id, "addr", v.Addr, "server", owner}})
			continue
		}
		if others := slices.DeleteFunc(slices.Clone(byAddr[v.Addr]), func(o string) bool { return o == id }); len(others) > 0 {
			p.Notes = append(p.Notes, planNote{Reason: "address", Key: id + "|" + v.Addr + "|" + strings.Join(others, ","),
				Msg:  "refusing member: another live member advertises the same Raft address",
				Args: []any{"member", id, "addr", v.Addr, "others", others}})
			continue
		}
		if configured {
			if !v.Meta.State {
				p.Notes = append(p.Notes, planNote{Reason: "duplicate_id", Key: id + "|" + v.Addr,
					Msg:  "refusing member: a node without Raft state reuses the id of a configured server at another address",
					Args: []any{"member", id, "addr", v.Addr, "configured_addr", s.Addr}})
				continue
			}
			if v.State == MemberAlive {
				p.Action = &planAction{Kind: actUpdateAddr, ID: id, Addr: v.Addr, Voter: s.Voter, Why: "restarted at a new address (was " + s.Addr + ")"}
				return p
			}
			continue
		}
		if v.State != MemberAlive {
			continue // suspect: wait
		}
		if voters < in.MaxVoters {
			p.Action = &planAction{Kind: actAddVoter, ID: id, Addr: v.Addr, Why: fmt.Sprintf("new member; %d of %d voters", voters, in.MaxVoters)}
		} else {
			p.Action = &planAction{Kind: actAddNonvoter, ID: id, Addr: v.Addr, Why: fmt.Sprintf("new member; voters full (%d)", in.MaxVoters)}
		}
		return p
	}

	// 4. Promotions.
	if voters < in.MaxVoters {
		for _, s := range servers {
			if !s.Voter && healthy(s.ID) {
				p.Action = &planAction{Kind: actPromote, ID: s.ID, Addr: s.Addr, Why: fmt.Sprintf("%d of %d voters", voters, in.MaxVoters)}
				return p
			}
		}
	}

	// 5. Demotions (MaxVoters lowered, or a larger static configuration).
	if voters > in.MaxVoters {
		var pick *planServer
		for i := range servers {
			s := &servers[i]
			if !s.Voter || s.ID == in.Self {
				continue
			}
			// Prefer an unhealthy voter, then the highest id.
			if pick == nil || (!healthy(s.ID) && healthy(pick.ID)) || healthy(s.ID) == healthy(pick.ID) {
				pick = s
			}
		}
		if pick != nil {
			p.Action = &planAction{Kind: actDemote, ID: pick.ID, Addr: pick.Addr, Why: fmt.Sprintf("%d voters > MaxVoters %d", voters, in.MaxVoters)}
			return p
		}
	}
	return p
}

// lead reconciles while this node leads (until ctx ends): on every gossip
// event, at the next reap deadline, and at least every two probe intervals.
func (m *gossip) lead(ctx context.Context) {
	missing := map[string]time.Time{}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-m.leadPoke:
		}
		timer.Reset(time.Until(m.reconcile(ctx, missing)))
	}
}

// reconcile makes the changes that are due, one at a time, and returns when
// to look again.
func (m *gossip) reconcile(ctx context.Context, missing map[string]time.Time) time.Time {
	interval := 2 * m.timing.ProbeInterval
	for range 16 {
		now := time.Now()
		if ctx.Err() != nil {
			return now.Add(interval)
		}
		f := m.n.raft.GetConfiguration()
		if f.Error() != nil {
			return now.Add(interval)
		}
		in := planInput{Self: m.n.cfg.ID, Now: now, Members: m.view(now), Missing: missing,
			MaxVoters: m.n.cfg.maxVoters(), ReapTimeout: m.n.cfg.reapTimeout()}
		seen := map[string]bool{}
		for _, s := range f.Configuration().Servers {
			id := string(s.ID)
			seen[id] = true
			in.Servers = append(in.Servers, planServer{ID: id, Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
			if _, ok := in.Members[id]; ok {
				delete(missing, id)
			} else if _, ok := missing[id]; !ok {
				missing[id] = now
			}
		}
		for id := range missing {
			if !seen[id] {
				delete(missing, id)
			}
		}
		p := planMembership(in)
		for _, nt := range p.Notes {
			m.report(nt)
		}
		if p.Action == nil {
			next := now.Add(interval)
			if !p.Next.IsZero() && p.Next.Before(next) {
				next = p.Next
			}
			return next
		}
		if err := m.apply(*p.Action); err != nil {
			return time.Now().Add(m.n.cfg.Timing.ElectionTimeout)
		}
	}
	return time.Now()
}

func (m *gossip) report(nt planNote) {
	if nt.Reason != "reap_refused" {
		m.conflict(nt.Reason, nt.Key, nt.Msg, nt.Args...)
		return
	}
	m.mu.Lock()
	k := nt.Reason + "|" + nt.Key
	seen := m.reported[k]
	m.reported[k] = true
	m.mu.Unlock()
	if !seen {
		m.n.metrics.memberChanges.WithLabelValues(string(actReap), "refused").Inc()
		m.log.Warn(nt.Msg, nt.Args...)
	}
}

// apply makes one configuration change and waits until it is committed (or
// fails: leadership lost, shutdown).
func (m *gossip) apply(a planAction) error {
	id, addr, to := raft.ServerID(a.ID), raft.ServerAddress(a.Addr), m.n.cfg.ForwardTimeout
	var f raft.IndexFuture
	switch a.Kind {
	case actAddVoter, actPromote:
		f = m.n.raft.AddVoter(id, addr, 0, to)
	case actAddNonvoter:
		f = m.n.raft.AddNonvoter(id, addr, 0, to)
	case actUpdateAddr:
		if a.Voter {
			f = m.n.raft.AddVoter(id, addr, 0, to)
		} else {
			f = m.n.raft.AddNonvoter(id, addr, 0, to)
		}
	case actDemote:
		f = m.n.raft.DemoteVoter(id, 0, to)
	case actRemoveLeft, actReap:
		f = m.n.raft.RemoveServer(id, 0, to)
	default:
		return fmt.Errorf("node: unknown membership action %q", a.Kind)
	}
	if err := f.Error(); err != nil {
		m.n.metrics.memberChanges.WithLabelValues(string(a.Kind), "error").Inc()
		m.log.Warn("membership change failed; will retry", "action", a.Kind, "member", a.ID, "addr", a.Addr, "err", err)
		return err
	}
	m.n.metrics.memberChanges.WithLabelValues(string(a.Kind), "ok").Inc()
	m.log.Info("membership change", "action", a.Kind, "member", a.ID, "addr", a.Addr, "why", a.Why, "index", f.Index())
	return nil
}
