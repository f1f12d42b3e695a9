package lockapi

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
)

// Readers on three replicas and two writers: never a reader during a
// writer, never two writers; a reader that arrives while a writer waits
// does not overtake it (writers finish although readers keep coming);
// tokens strictly increase over all grants of the name, and a write fence
// accepts every writer in turn while readers validate against it.
func TestRWLockReadersAndWritersAcrossReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var mu sync.Mutex
		readers, writers, writes := 0, 0, 0
		var maxToken, writerToken uint64 // the highest seen; the last writer's
		var mem fence.Memory
		// A writer's token exceeds every token granted before it (all of
		// them ended before it was granted), a reader's the last writer's.
		check := func(l *Lease) {
			tok := uint64(l.Token())
			if !l.Shared() && tok <= maxToken || l.Shared() && tok <= writerToken {
				t.Errorf("token %d (shared %v) after %d (writer %d)", tok, l.Shared(), maxToken, writerToken)
			}
			maxToken = max(maxToken, tok)
			if !l.Shared() {
				writerToken = tok
			}
			if readers > 0 && writers > 0 || writers > 1 {
				t.Errorf("%d readers with %d writers", readers, writers)
			}
		}
		var rwg, wwg sync.WaitGroup
		for r := range 6 {
			s := newSession(t, c, r%3)
			rwg.Add(1)
			go func() {
				defer rwg.Done()
				for ctx.Err() == nil {
					l, err := s.RLock(ctx, "doc")
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("reader %d: %v", r, err)
						}
						return
					}
					mu.Lock()
					readers++
					check(l)
					// A read validates against the write fence: no writer
					// granted after this reader has written.
					if hi := mem.Highest("doc"); hi > uint64(l.Token()) {
						t.Errorf("reader token %d, a later writer (%d) wrote during the read", l.Token(), hi)
					}
					mu.Unlock()
					time.Sleep(15 * time.Millisecond)
					mu.Lock()
					readers--
					mu.Unlock()
					l.Unlock(context.Background())
				}
			}()
		}
		for w := range 2 {
			s := newSession(t, c, w)
			wwg.Add(1)
			go func() {
				defer wwg.Done()
				for range 5 {
					l, err := s.Lock(ctx, "doc")
					if err != nil {
						t.Errorf("writer %d: %v", w, err)
						return
					}
					mu.Lock()
					writers++
					check(l)
					mu.Unlock()
					if err := mem.Admit("doc", uint64(l.Token())); err != nil {
						t.Errorf("writer %d refused by the fence: %v", w, err)
					}
					time.Sleep(5 * time.Millisecond)
					mu.Lock()
					writers--
					writes++
					mu.Unlock()
					l.Unlock(context.Background())
				}
			}()
		}
		wwg.Wait() // writers are not starved by a stream of readers
		cancel()
		rwg.Wait()
		if writes != 10 {
			t.Fatalf("%d writes", writes)
		}
	})
}

// A read lock is FIFO behind a waiting writer (TryRLock refuses), is
// released when its session expires (no lock-delay for readers, even with
// one configured), and a wait whose context ends leaves nothing queued.
func TestRWLockExpiryAndTry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		reader := newSession(t, c, 0, WithLockDelay(time.Minute))
		writer, other := newSession(t, c, 1), newSession(t, c, 2)
		rl, err := reader.RLock(ctx, "doc")
		if err != nil || !rl.Shared() {
			t.Fatalf("rlock: %v", err)
		}
		if l, err := other.TryRLock(ctx, "doc"); err != nil {
			t.Fatalf("a second reader: %v", err)
		} else {
			l.Unlock(ctx)
		}
		got := make(chan *Lease, 1)
		go func() {
			l, err := writer.Lock(ctx, "doc")
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		c.Eventually(5*time.Second, func() (bool, string) {
			li, _ := c.Nodes[2].Lock("doc")
			return len(li.Waiters) == 1, "the writer is not queued"
		})
		if _, err := other.TryRLock(ctx, "doc"); !errors.Is(err, ErrLocked) {
			t.Fatalf("a reader behind a waiting writer: %v", err)
		}
		tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		if _, err := other.RLock(tctx, "doc"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("reader wait with a deadline: %v", err)
		}
		cancel()
		other.flushBackground(t)
		reader.pauseKeepalives(true) // the reader's process stalls: its session expires
		select {
		case l := <-got:
			if l.Token() <= rl.Token() {
				t.Fatalf("writer token %d not above the reader's %d", l.Token(), rl.Token())
			}
		case <-time.After(5 * testTTL):
			t.Fatal("the writer was not granted after the reader's session expired (lock-delay applied to a reader?)")
		}
		c.Eventually(5*time.Second, func() (bool, string) {
			li, _ := c.Nodes[2].Lock("doc")
			return li.Held && len(li.Shared) == 0 && len(li.Waiters) == 0 && !li.Delayed, "the writer does not hold the lock alone"
		})
		if !errors.Is(rl.Err(), ErrLeaseLost) {
			t.Fatalf("the reader's lease: %v", rl.Err())
		}
	})
}
