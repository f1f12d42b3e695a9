package lockapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
)

// Issue 17 #3, the etcd#18163 class: while candidates on every replica
// campaign at once (so that the election's lock always has waiters),
// proclaim new values and resign, a slow observer on a follower receives
// every leadership change in order — each leader with its token and each
// of its values, nobody in between — and never a candidate that did not
// lead (a waiter), nor a leader older than one it already received.
func TestObserveDeliversEveryLeadershipChangeInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		leader := c.WaitLeader(time.Second)
		obs, err := NewElection(c.Nodes[c.Follower(leader)], "leader")
		if err != nil {
			t.Fatal(err)
		}
		ch, err := obs.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		won := map[uint64][]string{} // token → the values it led with, in order
		var wg sync.WaitGroup
		for cand := range 5 {
			s := newSession(t, c, cand%3)
			e, _ := NewElection(c.Nodes[cand%3], "leader")
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := range 4 {
					v := fmt.Sprintf("c%d/r%d", cand, round)
					l, err := e.Campaign(ctx, s, v)
					if err != nil {
						t.Errorf("campaign %s: %v", v, err)
						return
					}
					mu.Lock()
					won[uint64(l.Token())] = []string{v}
					mu.Unlock()
					if round%2 == 0 {
						p := v + "/proclaimed"
						if err := e.Proclaim(ctx, p); err != nil {
							t.Errorf("proclaim %s: %v", p, err)
						}
						mu.Lock()
						won[uint64(l.Token())] = append(won[uint64(l.Token())], p)
						mu.Unlock()
					}
					time.Sleep(time.Millisecond)
					if err := e.Resign(ctx); err != nil {
						t.Errorf("resign %s: %v", v, err)
					}
				}
			}()
		}
		var got []Leader
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		settled := false
		for !settled {
			select {
			case l := <-ch:
				got = append(got, l)
				time.Sleep(3 * time.Millisecond) // a slow receiver
			case <-done:
				// Drain what the observer still derives from the last entries.
				for quiet := false; !quiet; {
					select {
					case l := <-ch:
						got = append(got, l)
					case <-time.After(time.Second):
						quiet = true
					}
				}
				settled = true
			}
		}
		cancel()
		for range ch {
		}

		// The sequence the log implies: for every leader in token order,
		// its values, then (it resigned) nobody — unless the next leader was
		// granted in the same entry as the resignation, which the observer
		// may or may not show as a gap: "nobody" entries are compared
		// loosely, leaders exactly.
		var want []Leader
		for tok := range won {
			for _, v := range won[tok] {
				want = append(want, Leader{Token: tokenOf(tok), Value: v})
			}
		}
		sortLeaders(want)
		var leaders []Leader
		for i, l := range got {
			if !l.Valid() {
				continue
			}
			if _, ok := won[uint64(l.Token)]; !ok {
				t.Fatalf("observed leader %d (token %d, %q) never won a campaign: a waiter?", i, l.Token, l.Value)
			}
			leaders = append(leaders, l)
		}
		if len(leaders) != len(want) {
			t.Fatalf("observed %d leader states, want %d:\n%v\nwant\n%v", len(leaders), len(want), brief(leaders), brief(want))
		}
		for i := range want {
			if leaders[i].Token != want[i].Token || leaders[i].Value != want[i].Value {
				t.Fatalf("change %d: observed %v, want %v\n%v", i, brief(leaders[i:i+1]), brief(want[i:i+1]), brief(leaders))
			}
		}
		if last := got[len(got)-1]; last.Valid() {
			t.Fatalf("the last observation is %v, but everyone resigned", brief(got[len(got)-1:]))
		}
		t.Logf("%d observations, %d leaderships", len(got), len(won))
	})
}

// Campaign, Proclaim and Resign: the value is read with the leader on every
// replica; Resign hands over at once; a lost leadership cannot proclaim.
func TestElectionCampaignProclaimResign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		a, b := newSession(t, c, 0), newSession(t, c, 1)
		ea, _ := NewElection(c.Nodes[0], "svc")
		eb, _ := NewElection(c.Nodes[1], "svc")
		if err := ea.Proclaim(ctx, "x"); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("proclaim before leading: %v", err)
		}
		la, err := ea.Campaign(ctx, a, "a:7400")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ea.Campaign(ctx, a, "again"); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("a second campaign while leading: %v", err)
		}
		if err := ea.Proclaim(ctx, "a:7401"); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			c.Eventually(5*time.Second, func() (bool, string) {
				l := mustElection(t, c, i).Leader()
				return l.Token == la.Token() && l.Value == "a:7401", fmt.Sprintf("n%d sees %+v", i+1, l)
			})
		}
		won := make(chan *Lease, 1)
		go func() {
			l, err := eb.Campaign(ctx, b, "b:7400")
			if err != nil {
				t.Error(err)
			}
			won <- l
		}()
		c.Eventually(5*time.Second, func() (bool, string) {
			li, _ := c.Nodes[0].Lock("svc")
			return len(li.Waiters) == 1, "b not queued"
		})
		if err := ea.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		lb := <-won
		if lb.Token() <= la.Token() || lb.Value() != "b:7400" {
			t.Fatalf("b leads with token %d (a had %d), value %q", lb.Token(), la.Token(), lb.Value())
		}
		if err := ea.Proclaim(ctx, "stale"); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("proclaim after resigning: %v", err)
		}
		if err := la.SetValue(ctx, "stale"); !errors.Is(err, ErrNotHolder) {
			t.Fatalf("set value of an ended lease: %v", err)
		}
		c.Eventually(5*time.Second, func() (bool, string) {
			l := mustElection(t, c, 2).Leader()
			return l.Token == lb.Token() && l.Value == "b:7400", fmt.Sprintf("n3 sees %+v", l)
		})
	})
}

func mustElection(t *testing.T, c *clustertest.Cluster, i int) *Election {
	t.Helper()
	e, err := NewElection(c.Nodes[i], "svc")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func tokenOf(t uint64) Token { return Token(t) }

// sortLeaders orders by token, keeping each leader's values in order.
func sortLeaders(ls []Leader) {
	slices.SortStableFunc(ls, func(a, b Leader) int { return cmp.Compare(a.Token, b.Token) })
}

func brief(ls []Leader) string {
	var b strings.Builder
	for _, l := range ls {
		if !l.Valid() {
			b.WriteString(" [nobody]")
			continue
		}
		fmt.Fprintf(&b, " [%d %q]", l.Token, l.Value)
	}
	return b.String()
}
