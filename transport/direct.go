package transport

import (
	"context"
	"fmt"
	"time"
)

// maxDirect is the largest frame written on the sender's goroutine; larger
// ones go through the connection's writer goroutine.
const maxDirect = 16 << 10

// A direct write puts one frame on the wire from the goroutine that has it
// (a handler's reply, a caller's request) instead of handing it to the
// connection's writer goroutine. On an idle machine the hand-off costs a
// thread wake-up per frame, and a forwarded command is always cold: its
// follower's caller waited a whole commit since its last call, so
// BenchmarkRPCIdle's latency drops by about a third to a half when replies
// and requests are written directly.
//
// A direct write happens only while the writer is idle (wmu is free) and
// no frame waits in sendq (queued is 0), so frames still reach the wire in
// the order they were sent.

// writeDirect writes f and flushes it at once on the calling goroutine if
// the writer is idle and nothing is queued. tried reports whether it wrote
// at all; if it did, ok reports whether the write succeeded; a failed
// write fails the connection. A write blocks at most until the write
// deadline (as the writer's would) or, when cancel is not nil, until
// cancel ends: then the deadline moves to the past, the write fails, and
// with it the connection, since a half-written frame cannot be taken back.
// That happens only when the peer has stopped reading long enough to fill
// the socket's buffer.
func (m *muxConn) writeDirect(f []byte, cancel context.Context) (tried, ok bool) {
	if len(f) > maxDirect || m.dead() || !m.wmu.TryLock() {
		return false, false
	}
	if m.queued.Load() != 0 {
		m.wmu.Unlock()
		return false, false
	}
	err := m.raw.SetWriteDeadline(time.Now().Add(deadAfter * m.interval))
	if err == nil {
		var stop func() bool
		if cancel != nil && cancel.Done() != nil {
			m.cutMu.Lock()
			m.cuttable = true
			m.cutMu.Unlock()
			stop = context.AfterFunc(cancel, m.cutDirect)
		}
		m.bw.Write(f)
		err = m.bw.Flush()
		if stop != nil {
			m.cutMu.Lock()
			m.cuttable = false
			m.cutMu.Unlock()
			stop()
		}
	}
	m.wmu.Unlock()
	if err != nil {
		m.fail(fmt.Errorf("%w: write: %v", errConnectionLost, err))
		return true, false
	}
	return true, true
}

// cutDirect ends a blocked direct write whose sender gave up. It acts only
// while that write runs (cuttable, under cutMu): a cut that comes late
// must not move the deadline of the writer's next flush.
func (m *muxConn) cutDirect() {
	m.cutMu.Lock()
	defer m.cutMu.Unlock()
	if m.cuttable {
		m.raw.SetWriteDeadline(time.Unix(1, 0))
	}
}

// writeReply sends a server's reply: directly when it can, else queued as
// by send. It blocks at most as a queued write would (the write deadline);
// the handler has no caller of its own to return to.
func (m *muxConn) writeReply(f []byte) bool {
	if tried, ok := m.writeDirect(f, nil); tried {
		return ok
	}
	return m.send(f, nil)
}
