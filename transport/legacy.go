package transport

import (
	"sync"
	"time"
)

// legacyMemory is how long a dialer keeps using version 1 for an address
// that refused version 2 before it tries version 2 again (the peer may
// have been upgraded meanwhile).
const legacyMemory = time.Minute

// maxLegacyPeers bounds the remembered addresses.
const maxLegacyPeers = 1024

// legacyPeers remembers the addresses that refused version 2. Safe for
// concurrent use; the zero value is ready. Times are monotonic.
type legacyPeers struct {
	mu sync.Mutex
	m  map[string]time.Time // address → when it refused version 2
}

// remember records that addr refused version 2 just now.
func (l *legacyPeers) remember(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[string]time.Time)
	}
	if len(l.m) >= maxLegacyPeers {
		for a, at := range l.m {
			if time.Since(at) >= legacyMemory {
				delete(l.m, a)
			}
		}
		if len(l.m) >= maxLegacyPeers {
			clear(l.m)
		}
	}
	l.m[addr] = time.Now()
}

// known reports whether addr refused version 2 less than legacyMemory ago.
func (l *legacyPeers) known(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.m[addr]
	if ok && time.Since(at) >= legacyMemory {
		delete(l.m, addr)
		return false
	}
	return ok
}
