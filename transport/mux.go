package transport

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// sendQueueLen is the number of frames that may wait for a connection's
	// writer; senders block (bounded by their context) beyond it.
	sendQueueLen = 256
	// maxBatch bounds the frames written between two flushes.
	maxBatch = 256
	// ioBufSize is the size of each connection's read and write buffers.
	ioBufSize = 32 << 10
	// deadAfter is how many keepalive intervals of silence (or of a
	// blocked write) make a connection dead.
	deadAfter = 3
)

// muxConn is the part of an RPC connection shared by client and server: a
// writer goroutine that batches queued frames into few writes, keepalive
// and liveness checks, and the failure state. A server's reply and a
// client's request skip the queue when nothing waits in it (direct.go).
type muxConn struct {
	t        *Transport
	raw      net.Conn // closed on failure (and by Transport.Close)
	conn     net.Conn // raw, or the TLS conn over it
	client   bool     // the client side sends pings
	interval time.Duration

	sendq chan []byte
	// wmu is held while writing to bw (the writer goroutine, or a reply
	// written directly). queued counts the frames handed to sendq and not
	// yet written: a direct write happens only while it is 0, so frames
	// reach the wire in the order they were sent.
	wmu    sync.Mutex
	bw     *bufio.Writer
	queued atomic.Int64
	done   chan struct{} // closed on failure
	once   sync.Once
	err    error       // why it failed; set before done is closed
	onFail func(error) // runs once, after done is closed
	// busy, when set (client side), reports whether the connection was
	// used since its previous call; after idleTicks keepalive ticks in a
	// row without use the connection is closed (RPCIdleTimeout).
	busy      func() bool
	idleTicks int
	// heard is set by every frame read and cleared by each keepalive tick:
	// liveness counts ticks (monotonic timers), never reads a clock, so a
	// wall-clock step can neither kill a healthy connection nor hide a
	// dead one.
	heard atomic.Bool
	// cutMu guards cuttable: a direct write that its sender's context may
	// cut short is running (direct.go).
	cutMu    sync.Mutex
	cuttable bool
}

// newMuxConn returns the shared part of an RPC connection; a client pings
// every interval.
func newMuxConn(t *Transport, raw, conn net.Conn, client bool, interval time.Duration) *muxConn {
	m := &muxConn{
		t:        t,
		raw:      raw,
		conn:     conn,
		client:   client,
		interval: interval,
		sendq:    make(chan []byte, sendQueueLen),
		done:     make(chan struct{}),
	}
	m.bw = bufio.NewWriterSize(conn, ioBufSize)
	return m
}

// touch records that a frame arrived.
func (m *muxConn) touch() { m.heard.Store(true) }

// fail marks the connection dead with cause err, closes it and runs
// onFail. Only the first call has an effect.
func (m *muxConn) fail(err error) {
	m.once.Do(func() {
		m.err = err
		close(m.done)
		m.raw.Close()
		m.t.untrack(m.raw)
		if m.onFail != nil {
			m.onFail(err)
		}
	})
}

// dead reports whether the connection has failed.
func (m *muxConn) dead() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// send queues a frame, waiting for room until the connection fails or
// cancel is closed. It reports whether the frame was queued.
func (m *muxConn) send(f []byte, cancel <-chan struct{}) bool {
	if m.dead() {
		return false
	}
	m.queued.Add(1)
	select {
	case m.sendq <- f:
		return true
	case <-m.done:
	case <-cancel:
	}
	m.queued.Add(-1)
	return false
}

// trySend queues a frame if there is room right now.
func (m *muxConn) trySend(f []byte) {
	m.queued.Add(1)
	select {
	case m.sendq <- f:
	default:
		m.queued.Add(-1)
	}
}

// writeLoop writes queued frames, flushing when the queue runs dry, and
// runs the keepalive: the client pings every interval, and either side
// fails the connection after deadAfter ticks in a row without a frame
// (between deadAfter and deadAfter+1 intervals of silence).
func (m *muxConn) writeLoop() {
	ticker := time.NewTicker(m.interval)
	defer ticker.Stop()
	silentTicks, unusedTicks := 0, 0
	var ping [headerLen]byte
	header{kind: kindPing}.put(ping[:])
	for {
		select {
		case <-m.done:
			return
		case f := <-m.sendq:
			if err := m.writeBatch(f, true); err != nil {
				m.fail(fmt.Errorf("%w: write: %v", errConnectionLost, err))
				return
			}
		case <-ticker.C:
			if m.heard.Swap(false) {
				silentTicks = 0
			} else if silentTicks++; silentTicks >= deadAfter {
				m.fail(fmt.Errorf("%w: nothing received from %s for %d keepalive intervals of %v", errConnectionLost, m.raw.RemoteAddr(), silentTicks, m.interval))
				return
			}
			if m.busy != nil {
				if m.busy() {
					unusedTicks = 0
				} else if unusedTicks++; unusedTicks >= m.idleTicks {
					m.fail(fmt.Errorf("%w: closed after %d keepalive intervals without a call", errConnectionLost, unusedTicks))
					return
				}
			}
			if m.client {
				if err := m.writeBatch(ping[:], false); err != nil {
					m.fail(fmt.Errorf("%w: write: %v", errConnectionLost, err))
					return
				}
			}
		}
	}
}

// writeBatch writes first (taken from sendq if queued) and whatever else
// is queued (up to maxBatch frames), then flushes under a write deadline.
func (m *muxConn) writeBatch(first []byte, queued bool) error {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	n := int64(0)
	if queued {
		n++
	}
	m.bw.Write(first)
drain:
	for range maxBatch {
		select {
		case f := <-m.sendq:
			m.bw.Write(f)
			n++
		default:
			break drain
		}
	}
	err := m.flushLocked()
	m.queued.Add(-n)
	return err
}

// flushLocked flushes bw under a write deadline; the caller holds wmu.
func (m *muxConn) flushLocked() error {
	if err := m.raw.SetWriteDeadline(time.Now().Add(deadAfter * m.interval)); err != nil {
		return err
	}
	return m.bw.Flush()
}
