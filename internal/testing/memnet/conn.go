package memnet

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// chunk is one write's bytes, readable from readyAt on (zero = at once).
type chunk struct {
	data    []byte
	readyAt time.Time
}

// direction is the byte queue written by one end and read by the other.
type direction struct {
	chunks   []chunk
	buffered int
	eof      bool // the writer closed: reads return io.EOF once drained
	broken   bool // the reader closed: writes fail with EPIPE
	lost     bool // bytes were discarded while the direction was cut
	wake     *time.Timer
	wakeAt   time.Time
}

// pipe is the shared state of one connection: two directions and two ends.
// dirs[i] carries the bytes written by ends[i]; hosts[0] dialed hosts[1].
type pipe struct {
	net   *Network
	hosts [2]string
	ends  [2]*Conn
	id    uint64 // creation order on the network (FlowInfo.ID)
	addr  string // the listening address dialed

	mu      sync.Mutex
	cond    sync.Cond
	dirs    [2]direction
	closed  [2]bool
	isReset bool
	// preface holds the first bytes the dialer wrote (FlowFilter.Preface).
	preface []byte
	// flow are the per-connection faults of each direction (flows.go).
	flow [2]flowFault
	// taps record the dialer's writes (tap.go); set when the pipe is made.
	taps []*tapFlow
}

func newPipe(n *Network, hosts [2]string) *pipe {
	p := &pipe{net: n, hosts: hosts}
	p.cond.L = &p.mu
	return p
}

// reset breaks the connection at both ends (like a TCP RST): pending and
// later reads and writes fail with ECONNRESET. It reports whether the pipe
// was still open.
func (p *pipe) reset() bool {
	p.mu.Lock()
	if p.isReset || (p.closed[0] && p.closed[1]) {
		p.mu.Unlock()
		return false
	}
	p.isReset = true
	for i := range p.dirs {
		d := &p.dirs[i]
		d.chunks, d.buffered = nil, 0
		stopTimer(&d.wake)
	}
	for _, c := range p.ends {
		if c != nil {
			c.stopDeadlines()
		}
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.net.removePipe(p)
	return true
}

// lostAndHealed reports whether a direction of the pipe lost bytes and is no
// longer cut under f.
func (p *pipe) lostAndHealed(f *faultState) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isReset || (p.closed[0] && p.closed[1]) {
		return false
	}
	return (p.dirs[0].lost && !p.flow[0].cut && !f.cut(p.hosts[0], p.hosts[1]) && !f.ruleCuts(p, Forward)) ||
		(p.dirs[1].lost && !p.flow[1].cut && !f.cut(p.hosts[1], p.hosts[0]) && !f.ruleCuts(p, Backward))
}

// dropInFlight discards the bytes still on their way (delayed, not yet
// due) in each direction that f cuts, as a cut path loses the packets on
// it; the direction then counts as having lost bytes.
func (p *pipe) dropInFlight(f *faultState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for side := range p.dirs {
		d := &p.dirs[side]
		if len(d.chunks) == 0 || !f.cut(p.hosts[side], p.hosts[1-side]) {
			continue
		}
		keep := 0
		for keep < len(d.chunks) && !d.chunks[keep].readyAt.After(now) {
			keep++
		}
		if keep == len(d.chunks) {
			continue
		}
		for _, ch := range d.chunks[keep:] {
			d.buffered -= len(ch.data)
		}
		d.chunks = d.chunks[:keep]
		d.lost = true
		p.cond.Broadcast()
	}
}

// armWake makes sure a timer wakes the readers of d at or before at.
// Caller holds p.mu.
func (p *pipe) armWake(d *direction, at time.Time) {
	if d.wake != nil && !d.wakeAt.After(at) {
		return
	}
	stopTimer(&d.wake)
	d.wakeAt = at
	d.wake = time.AfterFunc(time.Until(at), func() {
		p.mu.Lock()
		d.wake = nil
		p.cond.Broadcast()
		p.mu.Unlock()
	})
}

func stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// deadline is one read or write deadline of an end. Guarded by pipe.mu.
type deadline struct {
	timer   *time.Timer
	gen     uint64
	expired bool
}

// Conn is one end of an in-memory connection. It implements net.Conn; all
// methods are safe for concurrent use. Writes are buffered (up to the
// network's buffer size per direction) so both ends may write before either
// reads. Close makes the peer's reads return io.EOF once they have drained
// what was written, and the peer's writes fail.
type Conn struct {
	p     *pipe
	side  int
	laddr Addr
	raddr Addr
	rdl   deadline
	wdl   deadline
}

var _ net.Conn = (*Conn)(nil)

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: NetworkName, Source: c.laddr, Addr: c.raddr, Err: err}
}

// LocalHost returns the name of the host this end belongs to.
func (c *Conn) LocalHost() string { return c.p.hosts[c.side] }

// RemoteHost returns the name of the peer's host.
func (c *Conn) RemoteHost() string { return c.p.hosts[1-c.side] }

// Read reads bytes written by the peer that are due (see Network.SetDelay).
func (c *Conn) Read(b []byte) (int, error) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	d := &p.dirs[1-c.side]
	for {
		switch {
		case p.closed[c.side]:
			return 0, c.opErr("read", net.ErrClosed)
		case p.isReset:
			return 0, c.opErr("read", syscall.ECONNRESET)
		case c.rdl.expired:
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		if len(d.chunks) > 0 {
			if len(b) == 0 {
				return 0, nil
			}
			now := time.Now()
			n := 0
			for len(d.chunks) > 0 && n < len(b) {
				head := &d.chunks[0]
				if !head.readyAt.IsZero() && head.readyAt.After(now) {
					break
				}
				k := copy(b[n:], head.data)
				n += k
				head.data = head.data[k:]
				if len(head.data) == 0 {
					d.chunks[0] = chunk{}
					d.chunks = d.chunks[1:]
				}
			}
			if n > 0 {
				d.buffered -= n
				p.cond.Broadcast()
				return n, nil
			}
			p.armWake(d, d.chunks[0].readyAt)
			p.cond.Wait()
			continue
		}
		if d.eof {
			return 0, io.EOF
		}
		if len(b) == 0 {
			return 0, nil
		}
		p.cond.Wait()
	}
}

// Write queues b for the peer. It blocks while the direction's buffer is
// full. While the direction is cut, it discards b and reports success (a
// black hole); the connection is then reset when the cut heals. A Tap
// that selected the connection records the dialer's b (tap.go).
func (c *Conn) Write(b []byte) (int, error) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	d := &p.dirs[c.side]
	from, to := p.hosts[c.side], p.hosts[1-c.side]
	total := 0
	for first := true; ; first = false {
		switch {
		case p.closed[c.side]:
			return total, c.opErr("write", net.ErrClosed)
		case p.isReset:
			return total, c.opErr("write", syscall.ECONNRESET)
		case c.wdl.expired:
			return total, c.opErr("write", os.ErrDeadlineExceeded)
		case d.broken:
			return total, c.opErr("write", syscall.EPIPE)
		}
		if len(b) == 0 {
			return total, nil
		}
		if c.side == 0 && len(p.preface) < prefaceLen {
			p.preface = append(p.preface, b[:min(len(b), prefaceLen-len(p.preface))]...)
		}
		if first && c.side == 0 {
			for _, tf := range p.taps {
				tf.record(b)
			}
		}
		f := p.net.faults.Load()
		if f.cut(from, to) || p.flow[c.side].cut || f.ruleCuts(p, Direction(c.side)) {
			d.lost = true
			return total + len(b), nil
		}
		space := p.net.bufSize - d.buffered
		if space <= 0 {
			p.cond.Wait()
			continue
		}
		k := min(space, len(b))
		ch := chunk{data: append([]byte(nil), b[:k]...)}
		if delay := f.byteDelay(from, to) + p.flow[c.side].delay; delay > 0 {
			ch.readyAt = time.Now().Add(delay)
		}
		d.chunks = append(d.chunks, ch)
		d.buffered += k
		total += k
		b = b[k:]
		p.cond.Broadcast()
	}
}

// Close closes this end. The peer reads io.EOF after draining and its
// writes fail with EPIPE. Closing twice returns an error wrapping
// net.ErrClosed.
func (c *Conn) Close() error {
	p := c.p
	p.mu.Lock()
	if p.closed[c.side] {
		p.mu.Unlock()
		return c.opErr("close", net.ErrClosed)
	}
	p.closed[c.side] = true
	p.dirs[c.side].eof = true
	in := &p.dirs[1-c.side]
	in.broken = true
	in.chunks, in.buffered = nil, 0
	stopTimer(&in.wake)
	c.stopDeadlines()
	both := p.closed[0] && p.closed[1]
	p.cond.Broadcast()
	p.mu.Unlock()
	if both {
		p.net.removePipe(p)
	}
	return nil
}

// stopDeadlines stops the deadline timers of c. Caller holds p.mu.
func (c *Conn) stopDeadlines() {
	stopTimer(&c.rdl.timer)
	stopTimer(&c.wdl.timer)
}

// LocalAddr returns this end's address.
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

// SetDeadline sets both the read and the write deadline.
func (c *Conn) SetDeadline(t time.Time) error {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.setDeadline(&c.rdl, t)
	c.setDeadline(&c.wdl, t)
	return nil
}

// SetReadDeadline sets the read deadline: a blocked or later Read fails with
// an error wrapping os.ErrDeadlineExceeded once t passes. Zero t means none.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.setDeadline(&c.rdl, t)
	return nil
}

// SetWriteDeadline is like SetReadDeadline for Write.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.setDeadline(&c.wdl, t)
	return nil
}

// setDeadline arms dl for t using a timer (so fake time works). Caller holds
// p.mu.
func (c *Conn) setDeadline(dl *deadline, t time.Time) {
	p := c.p
	stopTimer(&dl.timer)
	dl.gen++
	dl.expired = false
	if t.IsZero() || p.closed[c.side] || p.isReset {
		p.cond.Broadcast()
		return
	}
	dur := time.Until(t)
	if dur <= 0 {
		dl.expired = true
		p.cond.Broadcast()
		return
	}
	gen := dl.gen
	dl.timer = time.AfterFunc(dur, func() {
		p.mu.Lock()
		if dl.gen == gen {
			dl.expired = true
			dl.timer = nil
			p.cond.Broadcast()
		}
		p.mu.Unlock()
	})
}
