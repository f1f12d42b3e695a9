package lockapi

import (
	"context"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
)

// maxObserveBacklog bounds the changes an Observe channel keeps for a
// receiver that does not keep up; beyond it the backlog collapses to the
// latest leader.
const maxObserveBacklog = 1024

// Observe returns a channel that receives the current leader at once and
// then every change of leadership — a new leader (its token), a new value
// (Proclaim), or nobody leading — in the order this replica applies them,
// and is closed when ctx ends. Every Leader delivered held the election's
// exclusive grant at the log index it was derived from: Observe never
// reports a waiting candidate, a reader of the name, or a leader older
// than one it already delivered (the etcd#18163 class). Changes are derived
// from the replica's events (not re-read from a state that may be ahead of
// them), so none is skipped — unless the receiver falls more than
// maxObserveBacklog changes behind, or the replica drops events for this
// subscriber or installs a snapshot: then the state is re-read at its
// applied index and the current leader delivered, the changes in between
// skipped.
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	if ctx == nil {
		return nil, invalid("nil context")
	}
	sub, err := e.r.Subscribe(replica.EventFilter{Lock: e.name}, 256)
	if err != nil {
		return nil, err
	}
	out := make(chan Leader)
	go func() {
		defer close(out)
		defer sub.Close()
		o := observer{e: e}
		o.reread()
		for {
			var send chan Leader
			var next Leader
			if len(o.backlog) > 0 {
				send, next = out, o.backlog[0]
			}
			select {
			case <-ctx.Done():
				return
			case send <- next:
				o.backlog = o.backlog[1:]
			case ev := <-sub.C:
				select {
				case <-sub.Resync: // events were dropped before this one
					o.reread()
				default:
				}
				if ev.Index > o.index {
					o.apply(ev)
				}
			case <-sub.Resync:
				o.reread()
			}
		}
	}()
	return out, nil
}

// observer derives the leadership changes of an election from its events.
type observer struct {
	e       *Election
	cur     Leader
	index   uint64 // the state cur was read at; events at or below it are in it
	started bool
	backlog []Leader
}

// reread takes the leader from the state, with the index it was read at.
func (o *observer) reread() {
	li, index, _ := o.e.r.LockAt(o.e.name)
	o.index = index
	l := Leader{Name: o.e.name}
	if li.Held {
		l = leaderOf(o.e.name, li.Holder)
	}
	o.change(l, !o.started || !sameLeader(l, o.cur))
	o.started = true
}

// apply follows one event of the election's lock.
func (o *observer) apply(ev fsm.Event) {
	if ev.Shared || ev.Permits != 0 { // readers of the name do not lead
		return
	}
	switch ev.Kind {
	case fsmwire.EventGranted:
		l := Leader{Name: o.e.name, Session: SessionID(ev.Session), Token: ev.Token, Since: time.Unix(0, ev.At), Value: ev.Value}
		if si, ok := o.e.r.Session(ev.Session); ok {
			l.Description = si.Description
		}
		o.change(l, !sameLeader(l, o.cur))
	case fsmwire.EventReleased:
		if ev.Token == o.cur.Token {
			o.change(Leader{Name: o.e.name}, true)
		}
	case fsmwire.EventValueSet:
		if ev.Token == o.cur.Token && ev.Value != o.cur.Value {
			l := o.cur
			l.Value = ev.Value
			o.change(l, true)
		}
	}
}

func (o *observer) change(l Leader, changed bool) {
	if !changed {
		return
	}
	o.cur = l
	if len(o.backlog) >= maxObserveBacklog {
		o.backlog = o.backlog[:0]
	}
	o.backlog = append(o.backlog, l)
}

func sameLeader(a, b Leader) bool { return a.Token == b.Token && a.Value == b.Value }
