package fsm

import (
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// The model's primitives: read grants, semaphores, values (the package
// doc states their rules), as plainly as possible.

// admits reports whether the lock can grant w now, queue order aside.
func (l *mlock) admits(w mowner) bool {
	switch {
	case l.holder != nil || l.delayed:
		return false
	case l.limit > 0:
		return l.used()+w.permits <= l.limit
	case w.shared:
		return true
	}
	return len(l.shared) == 0
}

// used counts the permits held, by scanning.
func (l *mlock) used() int {
	n := 0
	for _, g := range l.shared {
		n += g.permits
	}
	return n
}

// grant gives l to w with the next token.
func (m *model) grant(l *mlock, w mowner) lockinfo.Token {
	m.token++
	w.token = m.token
	if w.shared || l.limit > 0 {
		l.shared = append(l.shared, w)
	} else {
		l.holder = &w
	}
	return m.token
}

func (m *model) setValue(c SetValue) Result {
	if _, ok := m.sessions[c.Session]; !ok {
		return Result{Status: fsmwire.StatusNoSession}
	}
	l := m.locks[c.Lock]
	if l == nil {
		return Result{Status: fsmwire.StatusNotHolder}
	}
	if h := l.holder; h != nil && h.owner == c.Owner && h.session == c.Session {
		if r := m.valueQuota(c.Session, h.value, c.Value); r.Status != 0 {
			return r
		}
		h.value = c.Value
		return Result{Status: fsmwire.StatusOK, Session: c.Session, Token: h.token}
	}
	for i, g := range l.shared {
		if g.owner == c.Owner && g.session == c.Session {
			if r := m.valueQuota(c.Session, g.value, c.Value); r.Status != 0 {
				return r
			}
			l.shared[i].value = c.Value
			return Result{Status: fsmwire.StatusOK, Session: c.Session, Token: g.token}
		}
	}
	return Result{Status: fsmwire.StatusNotHolder}
}
