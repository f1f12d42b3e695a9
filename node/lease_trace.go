package node

import (
	"errors"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/leasetrace"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
)

// The lease trace (internal/leasetrace): what this node's side of the lease
// protocol does, reported to a sink a test attached to the node — the
// implementation's half of checking a run against the lease model. With no
// sink attached every report point costs one atomic load and builds
// nothing.

// leaseTrace returns the node's trace sink, or nil.
func (n *Node) leaseTrace() leasetrace.Sink { return leasetrace.For(n) }

// traceSink returns the expiry manager's trace sink, or nil.
func (h expiryHost) traceSink() leasetrace.Sink {
	if h.trace == nil {
		return nil
	}
	return h.trace()
}

// traceApplied reports a command entry about to be applied (tracedFSM).
func traceApplied(s leasetrace.Sink, l *raft.Log) {
	if s == nil || l.Type != raft.LogCommand {
		return
	}
	s.Record(leasetrace.Event{At: time.Now().UnixNano(), Kind: leasetrace.Applied, Index: l.Index, Term: l.Term,
		Data: slices.Clone(l.Data)})
}

// traceVerdict names a keepalive's verdict for the trace.
func traceVerdict(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, replica.ErrSessionExpired):
		return leasetrace.VerdictRefused
	case errors.Is(err, errNotLeader):
		return leasetrace.VerdictNotLeader
	}
	return leasetrace.VerdictFailed
}

// traceSessions reports an event naming sessions (Install with their
// deadlines, ProposeExpire, ProposeRenewed).
func traceSessions(s leasetrace.Sink, kind leasetrace.Kind, ids []lockinfo.SessionID, deadlines []time.Time) {
	if s == nil {
		return
	}
	e := leasetrace.Event{At: time.Now().UnixNano(), Kind: kind, Sessions: make([]uint64, len(ids))}
	for i, id := range ids {
		e.Sessions[i] = uint64(id)
	}
	for _, d := range deadlines {
		e.Deadlines = append(e.Deadlines, d.UnixNano())
	}
	s.Record(e)
}

// traceInstalledLocked reports the deadlines a takeover installed
// (m.mu held).
func (m *expiryManager) traceInstalledLocked() {
	s := m.h.traceSink()
	if s == nil {
		return
	}
	ids := make([]lockinfo.SessionID, 0, len(m.sessions))
	for id := range m.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	dls := make([]time.Time, len(ids))
	for i, id := range ids {
		dls[i] = m.sessions[id].deadline
	}
	traceSessions(s, leasetrace.Install, ids, dls)
}

// traceReceived reports the keepalives of a batch received at received:
// refused or not-leader (verdicts), or accepted for a Renewed entry (the
// positions marked) or a leadership round (the others).
func traceReceived(s leasetrace.Sink, ids []lockinfo.SessionID, received time.Time, verdicts []error, marked []int) {
	for i, id := range ids {
		v := traceVerdict(verdicts[i])
		if verdicts[i] == nil {
			v = leasetrace.VerdictConfirm
			if slices.Contains(marked, i) {
				v = leasetrace.VerdictRenew
			}
		}
		s.Record(leasetrace.Event{At: received.UnixNano(), Kind: leasetrace.KeepAliveReceived, Session: uint64(id), Verdict: v})
	}
}

// traceAnswered reports the verdicts of a batch's keepalives once decided,
// with the deadline of each renewed session.
func traceAnswered(s leasetrace.Sink, m *expiryManager, ids []lockinfo.SessionID, received time.Time, verdicts []error) {
	now := time.Now().UnixNano()
	for i, id := range ids {
		e := leasetrace.Event{At: now, Kind: leasetrace.KeepAliveAnswered, Session: uint64(id), Sent: received.UnixNano(), Verdict: traceVerdict(verdicts[i])}
		if verdicts[i] == nil {
			m.mu.Lock()
			if l := m.sessions[id]; l != nil {
				e.Deadline = l.deadline.UnixNano()
			}
			m.mu.Unlock()
		}
		s.Record(e)
	}
}
