package transport

import (
	"net"
	"sync"
	"time"
)

// connLimits decides which inbound connections are admitted: at most
// maxConns open, maxPerHost from one source host, and maxHandshakes still
// in their handshake. It does no I/O and is not safe for concurrent use
// (the Transport calls it under its mutex). The zero counts are ready; the
// bounds must be positive.
type connLimits struct {
	maxConns, maxPerHost, maxHandshakes int

	conns, handshakes int
	perHost           map[string]int
}

// admit admits a new connection from host and counts it as open and in
// its handshake, or returns the reason (a rejected-metric label) to refuse
// it and counts nothing.
func (l *connLimits) admit(host string) string {
	switch {
	case l.conns >= l.maxConns:
		return rejectConnLimit
	case l.perHost[host] >= l.maxPerHost:
		return rejectHostLimit
	case l.handshakes >= l.maxHandshakes:
		return rejectHandshakeLimit
	}
	if l.perHost == nil {
		l.perHost = make(map[string]int)
	}
	l.conns++
	l.handshakes++
	l.perHost[host]++
	return ""
}

// handshakeDone moves an admitted connection out of its handshake.
func (l *connLimits) handshakeDone() { l.handshakes-- }

// release forgets an admitted connection from host that closed;
// handshaking says whether it was still in its handshake.
func (l *connLimits) release(host string, handshaking bool) {
	l.conns--
	if handshaking {
		l.handshakes--
	}
	if l.perHost[host]--; l.perHost[host] <= 0 {
		delete(l.perHost, host)
	}
}

// remoteHost is the source host of an accepted connection: its IP (or the
// remote address without the port, for other networks).
func remoteHost(c net.Conn) string {
	a := c.RemoteAddr()
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	if h, _, err := net.SplitHostPort(a.String()); err == nil {
		return h
	}
	return a.String()
}

// limitLogEvery is how often a refusal for a reached limit is logged at
// most (per reason); the refusals in between are counted in the log line.
const limitLogEvery = 10 * time.Second

// rateLog logs at most one line per key every limitLogEvery. Safe for
// concurrent use; the zero value is ready. Times are monotonic.
type rateLog struct {
	mu         sync.Mutex
	last       map[string]time.Time
	suppressed map[string]int
}

// allow reports whether a line for key may be logged now and how many
// were suppressed since the last one.
func (r *rateLog) allow(key string) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last, r.suppressed = make(map[string]time.Time), make(map[string]int)
	}
	if at, ok := r.last[key]; ok && time.Since(at) < limitLogEvery {
		r.suppressed[key]++
		return false, 0
	}
	n := r.suppressed[key]
	r.last[key], r.suppressed[key] = time.Now(), 0
	return true, n
}
