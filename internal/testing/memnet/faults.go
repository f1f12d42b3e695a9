package memnet

import (
	"context"
	"maps"
	"slices"
	"time"
)

// link is an ordered pair of hosts: bytes flow from → to.
type link struct{ from, to string }

// faultState is an immutable snapshot of the injected faults.
type faultState struct {
	blocked  map[link]bool          // one-way cuts set by Block
	group    map[string]int         // partition group per host; absent = unpartitioned
	isolated map[string]bool        // hosts cut from every other host
	delays   map[link]time.Duration // added one-way latency
	// byteDelays add one-way latency to bytes only (not to dials).
	byteDelays map[link]time.Duration
	// flowRules cut one direction of the connections a filter selects,
	// live and future ones (CutFlows).
	flowRules []flowRule
}

// cut reports whether bytes from → to are black-holed.
func (f *faultState) cut(from, to string) bool {
	if from == to {
		return false
	}
	if f.isolated[from] || f.isolated[to] {
		return true
	}
	if f.blocked[link{from, to}] {
		return true
	}
	gf, okf := f.group[from]
	gt, okt := f.group[to]
	return okf && okt && gf != gt
}

// delay returns the added latency from → to.
func (f *faultState) delay(from, to string) time.Duration {
	return f.delays[link{from, to}]
}

// byteDelay returns the latency added to bytes from → to.
func (f *faultState) byteDelay(from, to string) time.Duration {
	return f.delays[link{from, to}] + f.byteDelays[link{from, to}]
}

// clone returns a deep copy that can be modified.
func (f *faultState) clone() *faultState {
	return &faultState{
		blocked:  maps.Clone(f.blocked),
		group:    maps.Clone(f.group),
		isolated: maps.Clone(f.isolated),
		delays:   maps.Clone(f.delays),

		byteDelays: maps.Clone(f.byteDelays),
		flowRules:  slices.Clone(f.flowRules),
	}
}

// update applies change to a copy of the fault state, publishes it, wakes
// hanging dials, and resets every connection that lost bytes in a direction
// that is no longer cut.
func (n *Network) update(change func(f *faultState)) {
	n.mu.Lock()
	f := n.faults.Load().clone()
	change(f)
	n.faults.Store(f)
	close(n.changed)
	n.changed = make(chan struct{})
	ps := n.pipeList()
	n.mu.Unlock()

	for _, p := range ps {
		p.dropInFlight(f)
		if p.lostAndHealed(f) {
			p.reset()
		}
	}
}

// Partition splits the listed hosts into groups that cannot reach each other
// (in either direction). It replaces any earlier partition; hosts not listed
// in any group are not affected by it. Partition() with no groups removes the
// partition.
func (n *Network) Partition(groups ...[]string) {
	n.update(func(f *faultState) {
		f.group = make(map[string]int)
		for i, g := range groups {
			for _, h := range g {
				f.group[h] = i + 1
			}
		}
	})
}

// Heal removes every partition, one-way block and isolation (delays stay).
// Connections that lost bytes during a cut are reset.
func (n *Network) Heal() {
	n.update(func(f *faultState) {
		f.group = nil
		f.blocked = nil
		f.isolated = nil
	})
}

// Block cuts the direction from → to: bytes written that way are discarded
// and dials between the two hosts hang. The other direction is unaffected
// (but dials need both, as a TCP handshake does).
func (n *Network) Block(from, to string) {
	n.update(func(f *faultState) {
		if f.blocked == nil {
			f.blocked = make(map[link]bool)
		}
		f.blocked[link{from, to}] = true
	})
}

// Unblock removes a cut made by Block.
func (n *Network) Unblock(from, to string) {
	n.update(func(f *faultState) { delete(f.blocked, link{from, to}) })
}

// Isolate cuts host from every other host in both directions.
func (n *Network) Isolate(host string) {
	n.update(func(f *faultState) {
		if f.isolated == nil {
			f.isolated = make(map[string]bool)
		}
		f.isolated[host] = true
	})
}

// Rejoin removes an isolation made by Isolate.
func (n *Network) Rejoin(host string) {
	n.update(func(f *faultState) { delete(f.isolated, host) })
}

// SetDelay adds latency d to every byte sent from → to from now on (bytes
// already in flight keep their delay); d <= 0 removes it. Order is kept:
// a byte is never delivered before a byte written earlier.
func (n *Network) SetDelay(from, to string, d time.Duration) {
	n.update(func(f *faultState) {
		if d <= 0 {
			delete(f.delays, link{from, to})
			return
		}
		if f.delays == nil {
			f.delays = make(map[link]time.Duration)
		}
		f.delays[link{from, to}] = d
	})
}

// SetByteDelay adds latency d to every byte sent from → to from now on,
// like SetDelay, but leaves connection set-up alone: dials between the two
// hosts are not slowed (an asymmetric path on which one side hears the
// other late while its own messages go out at once — even on connections
// it dials itself). d <= 0 removes it.
func (n *Network) SetByteDelay(from, to string, d time.Duration) {
	n.update(func(f *faultState) {
		if d <= 0 {
			delete(f.byteDelays, link{from, to})
			return
		}
		if f.byteDelays == nil {
			f.byteDelays = make(map[link]time.Duration)
		}
		f.byteDelays[link{from, to}] = d
	})
}

// ClearDelays removes every delay set by SetDelay and SetByteDelay (bytes
// already in flight keep theirs).
func (n *Network) ClearDelays() {
	n.update(func(f *faultState) {
		f.delays = nil
		f.byteDelays = nil
	})
}

// DropConns resets every connection between hosts a and b (either side may
// have dialed), or every connection of host a when b is "". Both ends see
// ECONNRESET on their next read or write. It returns the number of
// connections reset.
func (n *Network) DropConns(a, b string) int {
	n.mu.Lock()
	ps := n.pipeList()
	n.mu.Unlock()
	count := 0
	for _, p := range ps {
		h := p.hosts
		if (h[0] == a && (b == "" || h[1] == b)) || (h[1] == a && (b == "" || h[0] == b)) {
			if p.reset() {
				count++
			}
		}
	}
	return count
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
