package fsm

import "github.com/raftlock/raftlock/internal/lockinfo"

// LockAt is Lock (with the same bounds on what it lists) together with the index of the last entry applied, read
// at once: the lock as it stands after that entry. A watcher that
// subscribed to the lock's events first and then calls LockAt knows which
// of the events it receives the state already includes (those of entries
// at or below the index).
func (f *FSM) LockAt(name string) (lockinfo.LockInfo, uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l := f.st.locks.get(name)
	if l == nil {
		return lockinfo.LockInfo{}, f.st.index, false
	}
	return f.st.lockInfo(name, l, maxPage), f.st.index, true
}
