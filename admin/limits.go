package admin

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Limits bound what HTTP clients can make the server hold: connection and
// request timeouts, body and header sizes, acquisitions per client and in
// all, and the size of listings. A zero field takes its default (see
// DefaultLimits); a negative one is refused by Validate.
//
// A client is a remote IP address (the host part of the connection's
// remote address; proxies' forwarding headers are not trusted). HTTP
// clients do not open sessions of their own: every acquisition of every
// client is a lease in the one session of the server's process, so the
// quotas below also keep that session within the cluster's per-session
// quota (fsm.Limits.MaxLocksPerSession, 10,000 by default) — keep
// MaxAcquisitions below it.
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
	}
}

// errInvalidLimits: Limits.Validate found a negative limit.
var errInvalidLimits = errors.New("admin: invalid limits")

// withDefaults fills the zero fields with their defaults.
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
	setInt(&l.MaxHeldPerClient, d.MaxHeldPerClient)
	setInt(&l.MaxAcquisitions, d.MaxAcquisitions)
	setInt(&l.MaxListedLocks, d.MaxListedLocks)
	setInt(&l.MaxListedWaiters, d.MaxListedWaiters)
	if l.MaxSnapshotBytes == 0 {
		l.MaxSnapshotBytes = d.MaxSnapshotBytes
	}
	return l
}

// Validate reports a negative limit.
func (l Limits) Validate() error {
	for name, v := range map[string]int64{
		"ReadHeaderTimeout": int64(l.ReadHeaderTimeout), "ReadTimeout": int64(l.ReadTimeout),
		"WriteTimeout": int64(l.WriteTimeout), "IdleTimeout": int64(l.IdleTimeout),
		"MaxHeaderBytes": int64(l.MaxHeaderBytes), "MaxBodyBytes": l.MaxBodyBytes,
		"MaxInFlightPerClient": int64(l.MaxInFlightPerClient), "MaxHeldPerClient": int64(l.MaxHeldPerClient),
		"MaxAcquisitions": int64(l.MaxAcquisitions), "MaxListedLocks": int64(l.MaxListedLocks),
		"MaxListedWaiters": int64(l.MaxListedWaiters), "MaxSnapshotBytes": l.MaxSnapshotBytes,
	} {
		if v < 0 {
			return fmt.Errorf("%w: %s is negative (%d)", errInvalidLimits, name, v)
		}
	}
	return nil
}

// ConfigureHTTP sets the server's timeouts and header limit from the
// Server's Limits. Call it on the http.Server that serves Handler.
func (s *Server) ConfigureHTTP(srv *http.Server) {
	srv.ReadHeaderTimeout = s.limits.ReadHeaderTimeout
	srv.ReadTimeout = s.limits.ReadTimeout
	srv.WriteTimeout = s.limits.WriteTimeout
	srv.IdleTimeout = s.limits.IdleTimeout
	srv.MaxHeaderBytes = s.limits.MaxHeaderBytes
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
