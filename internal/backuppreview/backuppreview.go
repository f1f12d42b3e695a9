// Package backuppreview reads a backup (a state machine snapshot) offline,
// for the raftlock command's restore prompt: what the backup holds.
package backuppreview

import (
	"bytes"
	"io"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Preview is what a backup holds, as this binary reads it.
type Preview struct {
	Sessions, Held, Waiters int           // Held: grants of locks (holders, readers, permit holders)
	MaxTTL                  time.Duration // the longest TTL of a session that holds or waits
	LastToken               uint64
}

// Read reads a backup into a state machine of its own (nothing leaves
// this process).
func Read(data []byte) (Preview, error) {
	f := fsm.New(nil)
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		return Preview{}, err
	}
	st := f.Stats()
	p := Preview{Sessions: st.Sessions, Held: st.Held + st.Readers + st.SemaphoreHolders, Waiters: st.Waiters, LastToken: uint64(st.LastToken)}
	for after, more := lockinfo.SessionID(0), true; more; {
		var page []lockinfo.SessionInfo
		page, more = f.Sessions(after, 1000)
		for _, s := range page {
			if s.Locks > 0 && s.TTL > p.MaxTTL {
				p.MaxTTL = s.TTL
			}
			after = s.ID
		}
	}
	return p, nil
}
