package node

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Issue 20 (also noted): a peer whose announcement queue is nearly full gets
// only what fits; that must not cut what later peers get.
func TestAnnounceTruncatesOnlyTheFullPeersQueue(t *testing.T) {
	a := newAnnouncer(announcerHost{})
	a.peers, a.peersAt = []announcePeer{{"f~1", "full"}, {"e~1", "empty"}}, time.Now()
	for _, p := range a.peers {
		a.busy[p.addr] = true // a sender runs already: announce only queues
	}
	a.queues["full"] = make([]fsm.Event, maxPendingGrants-1)
	grants := []fsm.Event{
		{Kind: fsmwire.EventGranted, FromQueue: true, Lock: "a", Token: 1},
		{Kind: fsmwire.EventGranted, FromQueue: true, Lock: "b", Token: 2},
		{Kind: fsmwire.EventGranted, FromQueue: true, Lock: "c", Token: 3},
	}
	a.collect(grants)
	a.announce()
	if got := len(a.queues["full"]); got != maxPendingGrants {
		t.Fatalf("full peer's queue holds %d, want %d", got, maxPendingGrants)
	}
	if got := len(a.queues["empty"]); got != len(grants) {
		t.Fatalf("the next peer got %d of %d grants", got, len(grants))
	}
}

// One notice in flight per peer, later grants queued behind it and sent
// together; a slow peer does not hold up another; a failing peer drops its
// queue (the log still brings the grants).
func TestAnnouncerBackPressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		var mu sync.Mutex
		notices := map[string][]int{} // peer → grants per notice
		release := make(chan struct{})
		a := newAnnouncer(announcerHost{ctx: ctx, wg: &wg,
			peers: func() []announcePeer { return []announcePeer{{"s~1", "slow"}, {"f~1", "fast"}, {"d~1", "down"}} },
			send: func(ctx context.Context, addr string, notice []byte) error {
				grants, err := decodeGrantNotice(notice)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				notices[addr] = append(notices[addr], len(grants))
				mu.Unlock()
				switch addr {
				case "slow":
					select {
					case <-release:
					case <-ctx.Done():
					}
				case "down":
					return errors.New("unreachable")
				}
				return nil
			},
			sent: func(error) {},
		})
		grant := func(tok int) {
			a.collect([]fsm.Event{{Kind: fsmwire.EventGranted, FromQueue: true, Index: uint64(tok), Session: 1, Lock: "l", Owner: lockinfo.OwnerID{1}, Token: lockinfo.Token(tok)}})
			a.announce()
			synctest.Wait()
		}
		grant(1)
		grant(2)
		grant(3)
		mu.Lock()
		if got := notices["fast"]; len(got) != 3 {
			t.Errorf("fast peer got notices %v, want one per grant", got)
		}
		if got := notices["slow"]; len(got) != 1 {
			t.Errorf("slow peer got notices %v while the first was in flight", got)
		}
		if got := notices["down"]; len(got) != 3 {
			t.Errorf("failing peer: notices %v (each failure drops its queue; the next grant tries again)", got)
		}
		mu.Unlock()
		close(release)
		synctest.Wait()
		mu.Lock()
		if got := notices["slow"]; len(got) != 2 || got[1] != 2 {
			t.Errorf("slow peer got notices %v, want the queued two grants in one notice", got)
		}
		mu.Unlock()
		cancel()
		wg.Wait()
	})
}
