package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// The Raft stream. Version 1 carries hashicorp/raft's stream raw in both
// directions. Version 2 cuts the dialer→listener direction into chunks,
//
//	offset size field
//	0      4    length n, big endian, at most maxChunk
//	4      n    n bytes of the raft stream
//
// where a chunk of length 0 is a keepalive that carries nothing. The
// listener→dialer direction (raft's responses) stays raw.
//
// The listener closes an inbound Raft connection (either version) on which
// no byte arrives for RaftIdleTimeout while raft waits to read, or on which
// a response cannot be written for RaftIdleTimeout. raft's
// NetworkTransport keeps idle outbound connections in a pool (up to
// RaftMaxPool per peer, plus the pipeline connection, which carries nothing
// while the log does not grow) and only notices a cut when it next uses
// one: that RPC fails, is logged and retried on a new connection (an
// election can lose a vote that way). So a version-2 dialer keeps every
// Raft connection alive instead: when it wrote nothing for a third of the
// listener's RaftIdleTimeout (announced in the listener's hello), it sends
// a keepalive. Healthy connections are never cut; a legacy (version 1)
// dialer's idle ones are.
const (
	chunkHeaderLen = 4
	// maxChunk bounds a chunk; larger writes are split.
	maxChunk = 1 << 20
	// smallChunk: writes up to this size are copied behind their header
	// and sent in one Write (one TLS record, one segment).
	smallChunk = 16 << 10
	// inboundRaftBuf is the read buffer under a version-2 inbound stream
	// (for chunk headers; raft's own reader buffers the data).
	inboundRaftBuf = 4 << 10
	// minKeepalive bounds how often a dialer sends keepalives.
	minKeepalive = time.Millisecond
)

// raftConn is a Raft connection handed to raft.NetworkTransport, inbound
// (from Accept) or outbound (from Dial). Closing it also forgets it.
type raftConn struct {
	net.Conn          // the connection to use (TLS over raw, or raw)
	raw      net.Conn // tracked, for Close
	t        *Transport
	accepted bool // inbound: counted in streamLayer.open until closed
	framed   bool // version 2: dialer→listener chunks
	once     sync.Once
	closed   chan struct{}

	// inbound
	idle  time.Duration // RaftIdleTimeout
	br    *bufio.Reader // framed: over Conn
	rem   int           // framed: bytes left in the current chunk
	guard raftGuard     // bounds each request before raft decodes it

	// outbound, framed
	wmu     sync.Mutex
	wdl     time.Time // the write deadline raft set
	wrote   atomic.Bool
	scratch []byte
}

// newInboundRaftConn wraps an accepted Raft connection of the given
// preface version.
func newInboundRaftConn(t *Transport, raw, conn net.Conn, version byte) *raftConn {
	c := &raftConn{Conn: conn, raw: raw, t: t, accepted: true, idle: t.cfg.RaftIdleTimeout, closed: make(chan struct{})}
	c.guard.vote = t.cfg.RaftVoteGate
	if version == versionHello {
		c.framed = true
		c.br = bufio.NewReaderSize(conn, inboundRaftBuf)
	}
	return c
}

// newOutboundRaftConn wraps a dialed Raft connection and, for version 2,
// starts its keepalive.
func (t *Transport) newOutboundRaftConn(s *session) *raftConn {
	c := &raftConn{Conn: s.conn, raw: s.raw, t: t, closed: make(chan struct{})}
	if s.version == versionHello {
		c.framed = true
		if s.peer.idle > 0 {
			every := max(s.peer.idle/3, minKeepalive)
			if !t.goTracked(func() { c.keepalive(every) }) {
				c.Close()
			}
		}
	}
	return c
}

// Read reads raft's stream. Inbound, it arms the idle deadline and, for
// version 2, strips chunk headers and keepalives. Once the stream layer or
// the Transport is closed, or the connection was idle too long, read
// errors are reported as io.EOF, so raft treats the connection as ended
// rather than logging a decode error per connection.
func (c *raftConn) Read(b []byte) (int, error) {
	if !c.accepted {
		n, err := c.Conn.Read(b)
		return n, c.readErr(err)
	}
	if !c.framed {
		c.armIdle()
		n, err := c.Conn.Read(b)
		return c.guarded(b[:n], err)
	}
	for c.rem == 0 {
		var h [chunkHeaderLen]byte
		c.armIdle()
		if _, err := io.ReadFull(c.br, h[:]); err != nil {
			return 0, c.readErr(err)
		}
		n := binary.BigEndian.Uint32(h[:])
		if n > maxChunk {
			err := fmt.Errorf("%w: Raft chunk of %d bytes (at most %d)", errProtocol, n, maxChunk)
			c.violation(err)
			return 0, err
		}
		c.rem = int(n)
	}
	c.armIdle()
	n, err := c.br.Read(b[:min(len(b), c.rem)])
	c.rem -= n
	return c.guarded(b[:n], err)
}

// guarded passes bytes read from an inbound connection through the guard:
// bytes that break its bounds, or a vote request the vote gate refuses,
// never reach raft, and close the connection. A refused vote reads as the
// end of the stream (io.EOF), so raft ends the connection quietly: the
// peer broke no rule.
func (c *raftConn) guarded(b []byte, err error) (int, error) {
	if gerr := c.guard.feed(b); gerr != nil {
		if errors.Is(gerr, errVoteRefused) {
			c.t.log.Debug("transport: closing Raft connection: vote request refused", "remote", c.raw.RemoteAddr().String())
			c.Close()
			return 0, io.EOF
		}
		c.violation(gerr)
		return 0, gerr
	}
	return len(b), c.readErr(err)
}

// violation closes an inbound connection that broke the stream's rules.
func (c *raftConn) violation(err error) {
	c.t.metrics.protocol.Inc()
	c.t.log.Debug("transport: closing Raft connection: protocol violation", "remote", c.raw.RemoteAddr().String(), "err", err)
	c.Close()
}

// armIdle sets the inbound read deadline RaftIdleTimeout from now.
func (c *raftConn) armIdle() { c.Conn.SetReadDeadline(time.Now().Add(c.idle)) }

// readErr maps read errors: nil stays nil; an idle timeout (inbound) or
// any error after the stream layer closed becomes io.EOF.
func (c *raftConn) readErr(err error) error {
	switch {
	case err == nil || err == io.EOF:
		return err
	case c.accepted && errors.Is(err, os.ErrDeadlineExceeded):
		c.t.metrics.raftIdle.Inc()
		c.t.log.Debug("transport: closing idle Raft connection", "remote", c.raw.RemoteAddr().String(), "idle", c.idle)
		c.Close()
		return io.EOF
	case c.t.stream.isClosed():
		return io.EOF
	}
	return err
}

// Write writes raft's stream: inbound under a write deadline of
// RaftIdleTimeout (a dialer that stops reading its responses is cut),
// outbound version 2 in chunks.
func (c *raftConn) Write(b []byte) (int, error) {
	if c.accepted {
		c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
		return c.Conn.Write(b)
	}
	if !c.framed {
		return c.Conn.Write(b)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wrote.Store(true)
	var written int
	for len(b) > 0 {
		n := min(len(b), maxChunk)
		if err := c.writeChunk(b[:n]); err != nil {
			return written, err
		}
		written += n
		b = b[n:]
	}
	return written, nil
}

// writeChunk writes one chunk. Caller holds wmu.
func (c *raftConn) writeChunk(p []byte) error {
	if len(p) <= smallChunk {
		if c.scratch == nil {
			c.scratch = make([]byte, chunkHeaderLen+smallChunk)
		}
		binary.BigEndian.PutUint32(c.scratch, uint32(len(p)))
		n := copy(c.scratch[chunkHeaderLen:], p)
		_, err := c.Conn.Write(c.scratch[:chunkHeaderLen+n])
		return err
	}
	var h [chunkHeaderLen]byte
	binary.BigEndian.PutUint32(h[:], uint32(len(p)))
	bufs := net.Buffers{h[:], p}
	_, err := bufs.WriteTo(c.Conn)
	return err
}

// keepalive sends an empty chunk whenever a tick passes without a write,
// until the connection closes. A keepalive that cannot be written within
// its interval closes the connection (raft then fails its next RPC on it,
// as it would have anyway).
func (c *raftConn) keepalive(every time.Duration) {
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	var empty [chunkHeaderLen]byte
	for {
		select {
		case <-c.closed:
			return
		case <-c.t.stream.closed:
			return
		case <-c.t.ctx.Done():
			return
		case <-ticker.C:
		}
		if c.wrote.Swap(false) || !c.wmu.TryLock() {
			continue // written meanwhile, or a write is in progress
		}
		c.Conn.SetWriteDeadline(time.Now().Add(every))
		_, err := c.Conn.Write(empty[:])
		c.Conn.SetWriteDeadline(c.wdl)
		c.wmu.Unlock()
		if err != nil {
			c.Close()
			return
		}
	}
}

// SetDeadline sets raft's read and write deadlines (outbound framed: the
// write deadline is remembered for the keepalive to restore).
func (c *raftConn) SetDeadline(t time.Time) error { return c.setWrite(t, c.Conn.SetDeadline) }

// SetWriteDeadline sets raft's write deadline (see SetDeadline).
func (c *raftConn) SetWriteDeadline(t time.Time) error { return c.setWrite(t, c.Conn.SetWriteDeadline) }

// setWrite applies a deadline raft sets that includes the write deadline.
func (c *raftConn) setWrite(t time.Time, set func(time.Time) error) error {
	if c.accepted || !c.framed {
		return set(t)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wdl = t
	return set(t)
}

// Close closes the connection (sending a TLS close_notify when on TLS).
// Idempotent.
func (c *raftConn) Close() error {
	var err error
	c.once.Do(func() {
		close(c.closed)
		err = c.Conn.Close()
		c.raw.Close()
		c.t.untrack(c.raw)
		if c.accepted {
			c.t.stream.accepted(-1)
		}
	})
	return err
}
