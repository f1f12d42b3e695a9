package memnet

import (
	"bytes"
	"cmp"
	"slices"
	"time"
)

// Per-connection ("flow") faults: unlike the host-pair faults of faults.go,
// these act on one connection and one direction of it — a stalled pooled
// connection whose requests arrive late (after the caller retried on another
// connection: the server then sees the request twice, and in another order
// than the retry), late replies, or one direction of one connection cut.
// Bytes are never duplicated or reordered inside one connection: a stream
// stays a stream, as with TCP.

// prefaceLen is how many of the dialer's first bytes a connection records.
const prefaceLen = 8

// Direction is one direction of a connection's bytes.
type Direction int

// Directions of a connection.
const (
	Forward  Direction = 0 // written by the dialing end (requests)
	Backward Direction = 1 // written by the accepting end (replies)
)

// flowFault is what is injected into one direction of one connection.
// Guarded by pipe.mu.
type flowFault struct {
	delay time.Duration // added to the host pair's delay, for bytes written from then on
	cut   bool          // bytes are discarded (the connection is reset once the cut is cleared)
}

// FlowFilter selects connections. Empty fields match everything.
type FlowFilter struct {
	From string // the dialing host
	To   string // the accepting host
	// Preface selects connections whose dialer's first bytes start with it
	// (a protocol type byte, say). Connections that have not yet written
	// that many bytes do not match.
	Preface []byte
}

// FlowInfo describes one live connection.
type FlowInfo struct {
	ID       uint64 // unique on the network, in the order connections were made
	From, To string // dialing and accepting host
	Addr     string // the listening address dialed
	Preface  []byte // the dialer's first bytes (up to 8)
}

// Flows lists the live connections that f selects, oldest first.
func (n *Network) Flows(f FlowFilter) []FlowInfo {
	n.mu.Lock()
	ps := n.pipeList()
	n.mu.Unlock()
	var out []FlowInfo
	for _, p := range ps {
		p.mu.Lock()
		info := FlowInfo{ID: p.id, From: p.hosts[0], To: p.hosts[1], Addr: p.addr, Preface: slices.Clone(p.preface)}
		dead := p.isReset || p.closed[0] || p.closed[1]
		p.mu.Unlock()
		if dead || (f.From != "" && f.From != info.From) || (f.To != "" && f.To != info.To) ||
			(len(f.Preface) > 0 && !bytes.HasPrefix(info.Preface, f.Preface)) {
			continue
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b FlowInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// flow returns the live pipe with the given id, or nil.
func (n *Network) flow(id uint64) *pipe {
	n.mu.Lock()
	defer n.mu.Unlock()
	for p := range n.pipes {
		if p.id == id {
			return p
		}
	}
	return nil
}

// DelayFlow adds latency d to the bytes written from now on in direction
// dir of connection id (on top of any host-pair delay); d <= 0 removes it.
// Bytes keep their order. It reports whether the connection is still live.
func (n *Network) DelayFlow(id uint64, dir Direction, d time.Duration) bool {
	p := n.flow(id)
	if p == nil {
		return false
	}
	p.mu.Lock()
	p.flow[dir].delay = max(d, 0)
	p.mu.Unlock()
	return true
}

// CutFlow discards the bytes written from now on in direction dir of
// connection id (the writer is not told, as with a black-holed route).
// ClearFlows removes the cut and resets the connection if it lost bytes.
// It reports whether the connection is still live.
func (n *Network) CutFlow(id uint64, dir Direction) bool {
	p := n.flow(id)
	if p == nil {
		return false
	}
	p.mu.Lock()
	p.flow[dir].cut = true
	p.mu.Unlock()
	return true
}

// ResetFlow resets connection id at once, like a TCP RST (DropConns for
// one connection): both ends see ECONNRESET on their next read or write.
// It reports whether the connection was still live.
func (n *Network) ResetFlow(id uint64) bool {
	p := n.flow(id)
	return p != nil && p.reset()
}

// flowRule is a standing CutFlows rule.
type flowRule struct {
	filter FlowFilter
	dir    Direction
}

// ruleCuts reports whether a CutFlows rule cuts direction dir of p. The
// caller holds p.mu (the preface).
func (f *faultState) ruleCuts(p *pipe, dir Direction) bool {
	for _, r := range f.flowRules {
		if r.dir == dir && (r.filter.From == "" || r.filter.From == p.hosts[0]) &&
			(r.filter.To == "" || r.filter.To == p.hosts[1]) && bytes.HasPrefix(p.preface, r.filter.Preface) {
			return true
		}
	}
	return false
}

// CutFlows discards, from now on, the bytes written in direction dir of
// every connection that f selects — live ones and those made later (a
// connection is selected by its preface from the dialer's first write on,
// so with a Preface filter nothing of it gets through in the Forward
// direction). A black-holed route for one kind of traffic: a dialer that
// gives up on a dead connection and dials again is cut again. ClearFlows
// removes the rule.
func (n *Network) CutFlows(f FlowFilter, dir Direction) {
	n.update(func(s *faultState) {
		s.flowRules = append(s.flowRules, flowRule{filter: FlowFilter{From: f.From, To: f.To, Preface: slices.Clone(f.Preface)}, dir: dir})
	})
}

// ClearFlows removes every per-connection fault and CutFlows rule. Bytes already delayed keep
// their delay; a connection that lost bytes to a flow cut is reset. It
// returns the number of connections that had a fault.
func (n *Network) ClearFlows() int {
	if len(n.faults.Load().flowRules) > 0 {
		n.update(func(s *faultState) { s.flowRules = nil })
	}
	n.mu.Lock()
	ps := n.pipeList()
	n.mu.Unlock()
	f := n.faults.Load()
	count := 0
	for _, p := range ps {
		p.mu.Lock()
		had := p.flow != [2]flowFault{}
		p.flow = [2]flowFault{}
		p.mu.Unlock()
		if had {
			count++
		}
		if p.lostAndHealed(f) {
			p.reset()
		}
	}
	return count
}
