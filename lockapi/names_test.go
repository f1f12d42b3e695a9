package lockapi

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
)

// New lock names may not contain control characters: a name is shown on
// operators' terminals (the raftlock command, logs), where ESC sequences
// act. Every way to ask for a name refuses them before anything is sent;
// names the state machine accepts otherwise — other scripts, emoji, a
// bidirectional mark (escaped when shown) — still work. (The state
// machine itself still applies such names: entries already written must
// apply as they did.)
func TestNewLockNamesRefuseControlCharacters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		s := newSession(t, c, 0)
		for _, name := range []string{"job\x1b[2K\rok", "\x1b]52;c;cm0gLXJmIH4=\x07", "tab\tname", "c1\u009b2J", "del\x7f"} {
			// Bounded: without the check, these would be granted or wait.
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			for what, call := range map[string]func() error{
				"Lock":         func() error { _, err := s.Lock(ctx, name); return err },
				"TryLock":      func() error { _, err := s.TryLock(ctx, name); return err },
				"RLock":        func() error { _, err := s.RLock(ctx, name); return err },
				"Acquire":      func() error { _, err := s.Acquire(ctx, Semaphore{Name: name, Limit: 2}, 1); return err },
				"RunSingleton": func() error { return RunSingleton(ctx, s, name, func(context.Context, *Lease) error { return nil }) },
			} {
				if err := call(); !errors.Is(err, ErrInvalidArgument) {
					t.Errorf("%s(%q): %v, want ErrInvalidArgument", what, name, err)
				}
			}
		}
		synctest.Wait()
		if st := c.Nodes[0].Stats(); st.Locks != 0 {
			t.Errorf("a refused name reached the state machine: %+v", st)
		}
		for _, name := range []string{"Zürich/büro", "日本語", "👩‍💻", "admin\u202etxt"} {
			l, err := s.TryLock(ctx, name)
			if err != nil {
				t.Errorf("TryLock(%q): %v", name, err)
				continue
			}
			l.Unlock(ctx)
		}
	})
}
