package lease

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/leasetrace"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// The run's log, as the trace reports it: every command entry's first
// apply (index, term, time), each command replayed on a shadow state
// machine of its own — one entry per command, so that the events of each
// command are told apart (fsm applies an entry's commands as if each were
// its own entry) — and the locks' holders, waiters and delays after each
// command.

// runCmd is one command of the run's log.
type runCmd struct {
	index uint64 // the entry's log index
	pos   int    // its place in the entry
	term  uint64
	at    int64 // the entry's first apply by any replica (after its commit)
	cmd   fsm.Command
	res   fsm.Result
	evs   []fsm.Event
	dup   bool // a request (session, seq) that executed before: a duplicate, or stale
}

// runLog is the run's log of commands, in log order.
type runLog struct {
	cmds []runCmd
	// gapAt is the first index missing from the trace (0: none): the
	// shadow state machine stops there, and so does every check that
	// needs the log beyond it.
	gapAt uint64
	first uint64 // the first index reported
	// opened: session → the position in cmds of its OpenSession.
	opened map[lockinfo.SessionID]int
	// ttl and delay of each session (its OpenSession).
	ttl, delay map[lockinfo.SessionID]int64
}

// shadow collects a shadow state machine's events.
type shadow struct{ evs []fsm.Event }

func (s *shadow) Applied(_ uint64, evs []fsm.Event) { s.evs = append(s.evs, evs...) }
func (s *shadow) Restored(uint64)                   {}

// readLog builds the run's log from the trace's Applied events (the first
// apply of each index; later ones are ignored).
func readLog(trace []leasetrace.Event) (*runLog, error) {
	type entry struct {
		term uint64
		at   int64
		data []byte
	}
	entries := map[uint64]entry{}
	var idx []uint64
	for _, e := range trace {
		if e.Kind != leasetrace.Applied {
			continue
		}
		if prev, ok := entries[e.Index]; ok && prev.at <= e.At {
			continue
		}
		if _, ok := entries[e.Index]; !ok {
			idx = append(idx, e.Index)
		}
		entries[e.Index] = entry{term: e.Term, at: e.At, data: e.Data}
	}
	slices.Sort(idx)
	l := &runLog{opened: map[lockinfo.SessionID]int{}, ttl: map[lockinfo.SessionID]int64{}, delay: map[lockinfo.SessionID]int64{}}
	if len(idx) == 0 {
		return l, nil
	}
	l.first = idx[0]
	sh := &shadow{}
	f := fsm.New(sh)
	done := map[[2]uint64]bool{} // (session, seq) executed
	prevAt := int64(0)
	for k, i := range idx {
		if k > 0 && i != idx[k-1]+1 {
			// Configuration entries are not reported: a gap is real only
			// if the missing indexes hold commands, which the trace cannot
			// tell. The shadow goes on; a session or lock whose commands
			// fell into the gap shows as a mismatch of the shadow's state.
		}
		en := entries[i]
		e, err := fsm.DecodeEntry(en.data)
		if err != nil {
			return nil, fmt.Errorf("lease: conform: index %d: %w", i, err)
		}
		// First applies are in log order on each replica, but two
		// replicas' clocks of observation may disagree by a hair: keep
		// the times monotonic.
		at := max(en.at, prevAt)
		prevAt = at
		for pos, c := range e.Commands {
			sub, err := fsm.EncodeEntry(fsm.Entry{At: e.At, Commands: []fsm.Command{c}})
			if err != nil {
				return nil, fmt.Errorf("lease: conform: index %d: %w", i, err)
			}
			sh.evs = sh.evs[:0]
			resp := f.Apply(&raft.Log{Type: raft.LogCommand, Index: i<<16 + uint64(pos), Data: sub}).(*fsm.Response)
			rc := runCmd{index: i, pos: pos, term: en.term, at: at, cmd: c}
			if len(resp.Results) > 0 {
				rc.res = resp.Results[0]
			}
			rc.evs = slices.Clone(sh.evs)
			if s, seq, ok := request(c); ok && seq != 0 {
				k := [2]uint64{uint64(s), seq}
				rc.dup = done[k] || rc.res.Status == fsmwire.StatusStale
				done[k] = true
			}
			if o, ok := c.(fsm.OpenSession); ok && rc.res.Status == fsmwire.StatusOK {
				l.opened[rc.res.Session] = len(l.cmds)
				l.ttl[rc.res.Session], l.delay[rc.res.Session] = int64(o.TTL), int64(o.LockDelay)
			}
			l.cmds = append(l.cmds, rc)
		}
	}
	return l, nil
}

// request returns a session-scoped command's session and request number.
func request(c fsm.Command) (lockinfo.SessionID, uint64, bool) {
	switch c := c.(type) {
	case fsm.Acquire:
		return c.Session, c.Seq, true
	case fsm.Release:
		return c.Session, c.Seq, true
	case fsm.CloseSession:
		return c.Session, c.Seq, true
	case fsm.SetValue:
		return c.Session, c.Seq, true
	}
	return 0, 0, false
}

// lockState is a lock as the run's state machine has it after a command:
// its holder, its waiters in order, and its delay.
type lockState struct {
	holder  lockinfo.SessionID // 0: none
	token   lockinfo.Token
	waiters []lockinfo.SessionID
	delayed bool
	delayBy lockinfo.SessionID // the session whose grant's end began the delay
	delayTk lockinfo.Token     // the delay's token (EndDelay names it)
}

func (s lockState) clone() lockState {
	s.waiters = slices.Clone(s.waiters)
	return s
}

func (s lockState) waits(id lockinfo.SessionID) bool { return slices.Contains(s.waiters, id) }

// others reports whether a session other than id waits.
func (s lockState) others(id lockinfo.SessionID) bool {
	return slices.ContainsFunc(s.waiters, func(w lockinfo.SessionID) bool { return w != id })
}

func (s lockState) String() string {
	out := "free"
	if s.holder != 0 {
		out = fmt.Sprintf("held by session %d (token %d)", s.holder, s.token)
	}
	if s.delayed {
		out += fmt.Sprintf(", in the lock-delay of session %d's token %d", s.delayBy, s.delayTk)
	}
	if len(s.waiters) > 0 {
		out += fmt.Sprintf(", waiting: %v", s.waiters)
	}
	return out
}

// locksAfter returns, for each position in l.cmds, the state of lock name
// after that command (only for the commands that touch it, nil
// elsewhere), and the state before the first command.
func (l *runLog) lockTrack(name string) []*lockState {
	out := make([]*lockState, len(l.cmds))
	var st lockState
	for k := range l.cmds {
		rc := &l.cmds[k]
		touched := false
		for _, e := range rc.evs {
			if e.Lock != name {
				continue
			}
			touched = true
			switch e.Kind {
			case fsmwire.EventGranted:
				st.holder, st.token = e.Session, e.Token
				st.waiters = slices.DeleteFunc(st.waiters, func(w lockinfo.SessionID) bool { return w == e.Session })
				st.delayed = false
			case fsmwire.EventQueued:
				st.waiters = append(st.waiters, e.Session)
			case fsmwire.EventReleased:
				if st.holder == e.Session {
					st.holder, st.token = 0, 0
				}
				if e.DelayUntil != 0 {
					st.delayed, st.delayBy, st.delayTk = true, e.Session, e.DelayToken
				}
			case fsmwire.EventDequeued:
				i := slices.Index(st.waiters, e.Session)
				if i >= 0 {
					st.waiters = slices.Delete(st.waiters, i, i+1)
				}
			}
		}
		if ed, ok := rc.cmd.(fsm.EndDelay); ok {
			for _, d := range ed.Delays {
				if d.Lock == name && st.delayed && d.Token == st.delayTk {
					st.delayed, st.delayBy, st.delayTk = false, 0, 0
					touched = true
				}
			}
		}
		if touched {
			c := st.clone()
			out[k] = &c
		}
	}
	return out
}

// sessionsOf lists the sessions the log opened, in order.
func (l *runLog) sessions() []lockinfo.SessionID {
	ids := make([]lockinfo.SessionID, 0, len(l.opened))
	for id := range l.opened {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b lockinfo.SessionID) int { return cmp.Compare(l.opened[a], l.opened[b]) })
	return ids
}
