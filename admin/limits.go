package admin

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Limits bound what HTTP clients can make the server hold: connections,
// connection and request timeouts, body and header sizes, acquisitions and
// long polls per client and in all, the longest wait, and the size of
// listings. A zero field takes its default (see DefaultLimits); a negative
// one, or one that contradicts another, is refused by Validate.
//
// A client is who the quotas count for: the principal — a bearer token
// (all its users together, wherever they connect from) or a client
// certificate ("cert:<CN>") — and without authentication the remote IP
// address (the host part of the connection's remote address, an IPv6 one
// by its /64; proxies' forwarding headers are not trusted). Behind a
// reverse proxy give each client its own token: without one they all share
// the proxy's address. Per-client limits times the number of principals
// above a total (MaxAcquisitions, MaxPolls) let the first clients take it
// all: size them so that every principal keeps its share.
//
// A client-kept lease (the default) has a session of its own, so
// MaxAcquisitions also bounds the sessions the server's clients hold: keep
// it within this node's share of the cluster's sessions
// (fsm.Limits.MaxSessions, 100,000 by default, shared between the nodes).
// The leases of "session":"replica" acquisitions are all in the one shared
// session of the server's process, which the quotas below also keep within
// the cluster's per-session quota (fsm.Limits.MaxLocksPerSession, 10,000
// by default) — keep MaxAcquisitions below it.
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's headers (default 5 s).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included (default
	// 10 s): a client that sends its body slowly is cut off.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing the answer (default 10 s). Long polls
	// (a waiting acquire, /v1/lease/wait) get their wait on top of it.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request (default
	// 60 s).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds request headers (default 16 KiB).
	MaxHeaderBytes int
	// MaxBodyBytes bounds request bodies (default 4 KiB; the largest valid
	// body, an acquire of a 512-byte lock name, is well under 1 KiB).
	MaxBodyBytes int64
	// MaxInFlightPerClient bounds the acquire calls one client has in
	// progress at once, waiting ones included (default 64).
	MaxInFlightPerClient int
	// MaxHeldPerClient bounds the leases one client holds plus its acquire
	// calls in progress (default 1,000).
	MaxHeldPerClient int
	// MaxAcquisitions bounds the leases held plus acquire calls in progress
	// of all clients together (default 8,000).
	MaxAcquisitions int
	// MaxListedLocks bounds GET /v1/locks (default and largest ?limit;
	// default 1,000).
	MaxListedLocks int
	// MaxListedWaiters bounds the waiters listed per lock (default and
	// largest ?waiters; default 1,000); waiter_count always says how many
	// there are.
	MaxListedWaiters int
	// MaxSnapshotBytes bounds a backup restored through POST
	// /v1/admin/snapshot (default 256 MiB; a held lock takes about 50
	// bytes of a snapshot).
	MaxSnapshotBytes int64
	// MaxWait bounds a long poll's wait (default 5 min, at least 30 s): an
	// acquire's timeout_ms above it is refused (400), a lease wait's
	// shortened to it.
	MaxWait time.Duration
	// MaxPollsPerClient bounds the long polls — waiting acquires and
	// /v1/lease/wait calls — one client has in progress (default 64), and
	// MaxPolls those of all clients together (default 1,024); over either:
	// 429. Each holds a connection and two goroutines for up to MaxWait.
	MaxPollsPerClient int
	MaxPolls          int
	// MaxConns bounds the connections open at once to the http.Servers set
	// up by ConfigureHTTP (default 2,048), and MaxConnsPerAddr those from
	// one source address, an IPv6 one by its /64 (default 256). A new
	// connection over either gets the place of an idle keep-alive
	// connection (one of its own address for MaxConnsPerAddr), which is
	// closed; with none idle it is closed at once, before anything is read.
	// Behind a reverse proxy every client shares the proxy's address: raise
	// MaxConnsPerAddr up to MaxConns.
	MaxConns        int
	MaxConnsPerAddr int
}

// DefaultLimits returns the defaults of every limit.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout:    5 * time.Second,
		ReadTimeout:          10 * time.Second,
		WriteTimeout:         10 * time.Second,
		IdleTimeout:          60 * time.Second,
		MaxHeaderBytes:       16 << 10,
		MaxBodyBytes:         4 << 10,
		MaxInFlightPerClient: 64,
		MaxHeldPerClient:     1000,
		MaxAcquisitions:      8000,
		MaxListedLocks:       1000,
		MaxListedWaiters:     1000,
		MaxSnapshotBytes:     256 << 20,
		MaxWait:              5 * time.Minute,
		MaxPollsPerClient:    64,
		MaxPolls:             1024,
		MaxConns:             2048,
		MaxConnsPerAddr:      256,
	}
}

// errInvalidLimits: Limits.Validate found a negative limit or two that
// contradict each other.
var errInvalidLimits = errors.New("admin: invalid limits")

// withDefaults fills the zero fields with their defaults (a per-client
// default at most its total).
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	setDur := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	setInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setDur(&l.ReadHeaderTimeout, d.ReadHeaderTimeout)
	setDur(&l.ReadTimeout, d.ReadTimeout)
	setDur(&l.WriteTimeout, d.WriteTimeout)
	setDur(&l.IdleTimeout, d.IdleTimeout)
	setInt(&l.MaxHeaderBytes, d.MaxHeaderBytes)
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = d.MaxBodyBytes
	}
	setInt(&l.MaxInFlightPerClient, d.MaxInFlightPerClient)
	setInt(&l.MaxAcquisitions, d.MaxAcquisitions)
	setInt(&l.MaxHeldPerClient, min(d.MaxHeldPerClient, l.MaxAcquisitions))
	setInt(&l.MaxListedLocks, d.MaxListedLocks)
	setInt(&l.MaxListedWaiters, d.MaxListedWaiters)
	if l.MaxSnapshotBytes == 0 {
		l.MaxSnapshotBytes = d.MaxSnapshotBytes
	}
	setDur(&l.MaxWait, d.MaxWait)
	setInt(&l.MaxPolls, d.MaxPolls)
	setInt(&l.MaxPollsPerClient, min(d.MaxPollsPerClient, l.MaxPolls))
	setInt(&l.MaxConns, d.MaxConns)
	setInt(&l.MaxConnsPerAddr, min(d.MaxConnsPerAddr, l.MaxConns))
	return l
}

// minMaxWait is the shortest Limits.MaxWait: a waiting acquire's default
// wait, the raftlock command's.
const minMaxWait = defaultWait

// Validate reports a negative limit, and limits that contradict each other
// once the zero ones take their defaults: a per-client (or per-address)
// limit set above its total, MaxWait under 30 s.
func (l Limits) Validate() error {
	for name, v := range map[string]int64{
		"ReadHeaderTimeout": int64(l.ReadHeaderTimeout), "ReadTimeout": int64(l.ReadTimeout),
		"WriteTimeout": int64(l.WriteTimeout), "IdleTimeout": int64(l.IdleTimeout),
		"MaxHeaderBytes": int64(l.MaxHeaderBytes), "MaxBodyBytes": l.MaxBodyBytes,
		"MaxInFlightPerClient": int64(l.MaxInFlightPerClient), "MaxHeldPerClient": int64(l.MaxHeldPerClient),
		"MaxAcquisitions": int64(l.MaxAcquisitions), "MaxListedLocks": int64(l.MaxListedLocks),
		"MaxListedWaiters": int64(l.MaxListedWaiters), "MaxSnapshotBytes": l.MaxSnapshotBytes,
		"MaxWait": int64(l.MaxWait), "MaxPollsPerClient": int64(l.MaxPollsPerClient), "MaxPolls": int64(l.MaxPolls),
		"MaxConns": int64(l.MaxConns), "MaxConnsPerAddr": int64(l.MaxConnsPerAddr),
	} {
		if v < 0 {
			return fmt.Errorf("%w: %s is negative (%d)", errInvalidLimits, name, v)
		}
	}
	d := l.withDefaults()
	for _, p := range []struct {
		part, whole string
		pv, wv      int
	}{
		{"MaxHeldPerClient", "MaxAcquisitions", d.MaxHeldPerClient, d.MaxAcquisitions},
		{"MaxPollsPerClient", "MaxPolls", d.MaxPollsPerClient, d.MaxPolls},
		{"MaxConnsPerAddr", "MaxConns", d.MaxConnsPerAddr, d.MaxConns},
	} {
		if p.pv > p.wv {
			return fmt.Errorf("%w: %s %d above %s %d", errInvalidLimits, p.part, p.pv, p.whole, p.wv)
		}
	}
	if d.MaxWait < minMaxWait {
		return fmt.Errorf("%w: MaxWait %v under %v", errInvalidLimits, d.MaxWait, minMaxWait)
	}
	return nil
}

// ConfigureHTTP sets the server's timeouts, header limit and connection
// caps (MaxConns, MaxConnsPerAddr: through srv.ConnState, after any hook
// already set) from the Server's Limits. Call it on the http.Server that
// serves Handler; several http.Servers configured by one Server share its
// connection caps.
func (s *Server) ConfigureHTTP(srv *http.Server) {
	srv.ReadHeaderTimeout = s.limits.ReadHeaderTimeout
	srv.ReadTimeout = s.limits.ReadTimeout
	srv.WriteTimeout = s.limits.WriteTimeout
	srv.IdleTimeout = s.limits.IdleTimeout
	srv.MaxHeaderBytes = s.limits.MaxHeaderBytes
	prev := srv.ConnState
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		if prev != nil {
			prev(c, st)
		}
		s.conns.track(c, st)
	}
}

// LongPoll gives the request's connection wait more time than the server's
// read and write timeouts: a handler that will wait up to wait before it
// answers calls it first (a waiting acquire, a lease long poll). Without it
// the server's ReadTimeout would cancel the request's context in the middle
// of the wait. Errors (a ResponseWriter without deadlines) are ignored.
func (s *Server) LongPoll(w http.ResponseWriter, wait time.Duration) {
	LongPoll(w, wait, s.limits.WriteTimeout)
}

// LongPoll is Server.LongPoll for handlers of other packages that share
// the http.Server (the demo's): the connection's read and write deadlines
// move to now + wait + write.
func LongPoll(w http.ResponseWriter, wait, write time.Duration) {
	rc := http.NewResponseController(w)
	deadline := time.Now().Add(wait + write)
	rc.SetReadDeadline(deadline)
	rc.SetWriteDeadline(deadline)
}
