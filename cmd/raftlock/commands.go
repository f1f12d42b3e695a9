package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/raftlock/raftlock/admin"
)

// status: GET /v1/status?probe=1 (shown when not ready too: the answer is
// then 503 with the same body, and the command exits 1).
func (e *env) status(ctx context.Context) error {
	var st admin.StatusJSON
	err := e.c.call(ctx, "GET", "/v1/status?probe=1", nil, &st, 0)
	var ae *apiError
	notReady := errors.As(err, &ae) && ae.Code == 503 && jsonInto(ae.Raw, &st) == nil && st.ID != ""
	if err != nil && !notReady {
		return err
	}
	if perr := e.emit(st, func(t *tabwriter.Writer) {
		leader := st.LeaderID
		if leader == "" {
			leader = "none known"
		}
		row(t, "node", st.ID+" ("+st.State+")")
		row(t, "cluster", st.ClusterID)
		row(t, "leader", leader)
		row(t, "ready", yes(st.Health.Ready)+" "+strings.Join(st.Health.Reasons, "; "))
		row(t, "fault tolerance", st.Health.FaultTolerance)
		row(t, "term / commit / applied", fmt.Sprintf("%d / %d / %d", st.Term, st.CommitIndex, st.AppliedIndex))
		row(t, "cluster version", fmt.Sprintf("%d (this binary up to %d)", st.ClusterVersion, st.MaxClusterVersion))
		row(t, "locks held / waiters / sessions", fmt.Sprintf("%d / %d / %d", st.FSM.Held, st.FSM.Waiters, st.FSM.Sessions))
		row(t, "last token", st.FSM.LastToken)
		if st.Formation != "" {
			row(t, "formation", st.Formation)
		}
		for _, w := range st.Health.Warnings {
			row(t, "WARNING", w)
		}
	}); perr != nil {
		return perr
	}
	if notReady {
		return fmt.Errorf("not ready: %s", strings.Join(st.Health.Reasons, "; "))
	}
	return nil
}

func (e *env) members(ctx context.Context) error {
	var out struct {
		Members []admin.MemberJSON `json:"members"`
	}
	if err := e.c.call(ctx, "GET", "/v1/members", nil, &out, 0); err != nil {
		return err
	}
	return e.emit(out, func(t *tabwriter.Writer) {
		row(t, "ID", "ADDRESS", "GOSSIP", "STATE", "ROLE", "LEADER", "RAFT", "APPLIED", "LAG", "ERROR")
		for _, m := range out.Members {
			leader := ""
			if m.Leader {
				leader = "*"
			}
			applied := ""
			if m.Probed && m.Reachable {
				applied = strconv.FormatUint(m.AppliedIndex, 10)
			}
			row(t, m.ID, m.Addr, m.GossipAddr, m.State, m.Role, leader, m.RaftState, applied, m.Lag, m.ProbeError+m.Halted)
		}
	})
}

// locks lists a page of the locks (limit, at most 1,000) whose names
// start with prefix, from the first name after after; the table's last row
// says how to ask for the next.
func (e *env) locks(ctx context.Context, prefix, after string, limit int) error {
	q := url.Values{"limit": {strconv.Itoa(limit)}, "sync": {"1"}} // a linearizable view
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if after != "" {
		q.Set("after", after)
	}
	var out struct {
		Locks []admin.LockJSON `json:"locks"`
		Next  string           `json:"next,omitempty"`
	}
	if err := e.c.call(ctx, "GET", "/v1/locks?"+q.Encode(), nil, &out, 0); err != nil {
		return err
	}
	return e.emit(out, func(t *tabwriter.Writer) {
		row(t, "LOCK", "HOLDER", "SESSION", "TOKEN", "HELD FOR", "LEASE LEFT", "WAITERS", "NEXT")
		for _, l := range out.Locks {
			next := ""
			if len(l.Waiters) > 0 {
				next = fmt.Sprintf("#1 session %d %s", l.Waiters[0].Session, l.Waiters[0].Description)
			}
			switch {
			case l.Holder != nil:
				h := l.Holder
				row(t, l.Name, h.Description, h.Session, h.Token, ago(h.AcquiredAtUnixMS), ms(h.LeaseLeftMS), l.WaiterCount, next)
			case l.Limit > 0:
				row(t, l.Name, fmt.Sprintf("semaphore %d/%d permits", l.Used, l.Limit), "", "", "", "", l.WaiterCount, next)
				for _, h := range l.Shared {
					row(t, "  "+l.Name, h.Description, h.Session, h.Token, ago(h.AcquiredAtUnixMS), ms(h.LeaseLeftMS), "", fmt.Sprintf("%d permits", h.Permits))
				}
				if more := l.SharedCount - len(l.Shared); more > 0 {
					row(t, "  "+l.Name, fmt.Sprintf("(%d more holders)", more))
				}
			case len(l.Shared) > 0:
				row(t, l.Name, fmt.Sprintf("%d readers", l.SharedCount), "", "", "", "", l.WaiterCount, next)
			default:
				row(t, l.Name, "free", "", "", "", "", l.WaiterCount, next)
			}
		}
		if out.Next != "" {
			row(t, fmt.Sprintf("(more: raftlock locks -after %s)", strconv.Quote(out.Next)))
		}
	})
}

// sessions lists a page of the sessions (limit, at most 1,000) from the
// first id after after.
func (e *env) sessions(ctx context.Context, after uint64, limit int) error {
	q := url.Values{"limit": {strconv.Itoa(limit)}, "sync": {"1"}}
	if after != 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	var out struct {
		Sessions []admin.SessionJSON `json:"sessions"`
		Total    int                 `json:"total"`
		Next     uint64              `json:"next,omitempty"`
	}
	if err := e.c.call(ctx, "GET", "/v1/sessions?"+q.Encode(), nil, &out, 0); err != nil {
		return err
	}
	return e.emit(out, func(t *tabwriter.Writer) {
		row(t, "SESSION", "DESCRIPTION", "TTL", "LOCK DELAY", "CREATED", "LOCKS", "LEASE LEFT")
		for _, s := range out.Sessions {
			ttl, delay := s.TTLMS, s.LockDelayMS
			row(t, s.ID, s.Description, ms(&ttl), ms(&delay), ago(s.CreatedAtUnixMS), s.Locks, ms(s.LeaseLeftMS))
		}
		if out.Next != 0 {
			row(t, fmt.Sprintf("(%d sessions in all; more: raftlock sessions -after %d)", out.Total, out.Next))
		}
	})
}
