package admin

import (
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// connLimiter caps the connections open to the http.Servers set up by
// ConfigureHTTP: in all (Limits.MaxConns) and per source address
// (Limits.MaxConnsPerAddr, an address as the quotas count it: addrClient).
// It is their ConnState hook. A new connection over a cap takes the place
// of an idle keep-alive connection — of its own address for the
// per-address cap, any for the total — which is closed; with none idle it
// is closed at once, before anything is read. So a client that keeps idle
// connections cannot keep others out, and one that keeps busy ones is
// bounded by its address's share and by the request quotas (a long poll is
// the only request that stays). Safe for concurrent use.
type connLimiter struct {
	maxTotal, maxPerAddr int
	log                  *slog.Logger

	mu      sync.Mutex
	conns   map[net.Conn]*trackedConn
	perAddr map[string]*addrConns
	idle    map[net.Conn]struct{}
	// refused since the last warning, and when that was.
	refused  int
	warnedAt time.Time
}

type trackedConn struct {
	addr string
	idle bool
}

type addrConns struct {
	open int
	idle map[net.Conn]struct{}
}

func newConnLimiter(maxTotal, maxPerAddr int, log *slog.Logger) *connLimiter {
	return &connLimiter{maxTotal: maxTotal, maxPerAddr: maxPerAddr, log: log,
		conns: map[net.Conn]*trackedConn{}, perAddr: map[string]*addrConns{}, idle: map[net.Conn]struct{}{}}
}

// connRefusedWarnEvery spaces the warnings about refused connections.
const connRefusedWarnEvery = time.Minute

// track is the http.Server's ConnState hook.
func (l *connLimiter) track(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateNew:
		l.admitLocked(c)
	case http.StateIdle, http.StateActive:
		if tc := l.conns[c]; tc != nil && tc.idle != (st == http.StateIdle) {
			tc.idle = st == http.StateIdle
			a := l.perAddr[tc.addr]
			if tc.idle {
				l.idle[c] = struct{}{}
				a.idle[c] = struct{}{}
			} else {
				delete(l.idle, c)
				delete(a.idle, c)
			}
		}
	case http.StateClosed, http.StateHijacked:
		l.forgetLocked(c)
	}
}

// admitLocked tracks a new connection, making room by closing an idle one,
// or closes it.
func (l *connLimiter) admitLocked(c net.Conn) {
	addr := addrClient(c.RemoteAddr().String())
	a := l.perAddr[addr]
	if a != nil && a.open >= l.maxPerAddr && !l.evictLocked(a.idle) {
		l.refuseLocked(c, addr, "its address has "+strconv.Itoa(a.open)+" connections open (Limits.MaxConnsPerAddr)")
		return
	}
	if len(l.conns) >= l.maxTotal && !l.evictLocked(l.idle) {
		l.refuseLocked(c, addr, "the server has "+strconv.Itoa(len(l.conns))+" connections open (Limits.MaxConns)")
		return
	}
	if a == nil {
		a = &addrConns{idle: map[net.Conn]struct{}{}}
		l.perAddr[addr] = a
	}
	a.open++
	l.conns[c] = &trackedConn{addr: addr}
}

// evictLocked closes one connection of idle, if there is one, and forgets
// it. The close runs outside the accept loop: a TLS connection's says
// goodbye to its peer (close_notify), which may wait for it.
func (l *connLimiter) evictLocked(idle map[net.Conn]struct{}) bool {
	for c := range idle {
		l.forgetLocked(c)
		go c.Close()
		return true
	}
	return false
}

func (l *connLimiter) forgetLocked(c net.Conn) {
	tc := l.conns[c]
	if tc == nil {
		return // refused or evicted
	}
	delete(l.conns, c)
	delete(l.idle, c)
	a := l.perAddr[tc.addr]
	delete(a.idle, c)
	if a.open--; a.open == 0 {
		delete(l.perAddr, tc.addr)
	}
}

func (l *connLimiter) refuseLocked(c net.Conn, addr, why string) {
	c.Close()
	l.refused++
	if now := time.Now(); now.Sub(l.warnedAt) >= connRefusedWarnEvery {
		l.log.Warn("admin: HTTP connections refused", "count", l.refused, "last_from", addr, "why", why)
		l.refused, l.warnedAt = 0, now
	}
}

// open returns the connections tracked in all and from addr (tests).
func (l *connLimiter) open(addr string) (total, fromAddr int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a := l.perAddr[addr]; a != nil {
		fromAddr = a.open
	}
	return len(l.conns), fromAddr
}
