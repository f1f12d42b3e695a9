package transport

import "context"

// peer is the pool of RPC connections to one address. A pool exists only
// while it holds a connection or a dial: connections idle for
// RPCIdleTimeout close (see muxConn.writeLoop), failed ones leave their
// slot, and the address is forgotten with its last connection.
type peer struct {
	next  int
	slots []slot
}

// slot holds one pooled connection, or the dial in progress for it.
type slot struct {
	conn    *clientConn
	dialing chan struct{} // closed when the dial in progress ends
}

// pooledConn returns a live connection to addr, round-robin over the
// peer's slots, dialing when the chosen slot is empty or dead. Concurrent
// callers wait for one dial (each bounded by its own ctx).
func (t *Transport) pooledConn(ctx context.Context, addr string) (*clientConn, error) {
	for {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return nil, ErrClosed
		}
		p := t.peers[addr]
		if p == nil {
			p = &peer{slots: make([]slot, t.cfg.RPCConnsPerPeer)}
			t.peers[addr] = p
		}
		s := &p.slots[p.next]
		p.next = (p.next + 1) % len(p.slots)
		if s.conn != nil && !s.conn.dead() {
			c := s.conn
			t.mu.Unlock()
			return c, nil
		}
		if s.dialing != nil {
			wait := s.dialing
			t.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		s.conn = nil
		s.dialing = make(chan struct{})
		t.mu.Unlock()

		c, err := t.dialClient(ctx, addr)

		t.mu.Lock()
		close(s.dialing)
		s.dialing = nil
		if err == nil && !c.dead() {
			s.conn = c
		}
		t.prunePeer(addr, p)
		t.mu.Unlock()
		return c, err
	}
}

// dropConn removes a connection that failed or was closed as idle from its
// pool, and forgets the address once its pool is empty.
func (t *Transport) dropConn(c *clientConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[c.addr]
	if p == nil {
		return
	}
	for i := range p.slots {
		if p.slots[i].conn == c {
			p.slots[i].conn = nil
		}
	}
	t.prunePeer(c.addr, p)
}

// prunePeer forgets addr's pool p when it holds no connection and no dial
// is in progress. Caller holds t.mu.
func (t *Transport) prunePeer(addr string, p *peer) {
	if t.peers[addr] != p {
		return
	}
	for _, s := range p.slots {
		if s.conn != nil || s.dialing != nil {
			return
		}
	}
	delete(t.peers, addr)
}
