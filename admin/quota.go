package admin

import (
	"fmt"
	"net"
	"net/http"
	"sync"
)

// clientOf returns who a request comes from for the quotas: its remote IP
// address (see Limits).
func clientOf(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// quotas counts what each client holds (leases) and has in flight (acquire
// calls), and refuses an acquire that would exceed Limits. Clients with
// nothing counted are forgotten, so it costs only what is held. Safe for
// concurrent use.
type quotas struct {
	lim Limits

	mu      sync.Mutex
	clients map[string]*usage
	total   usage
}

type usage struct {
	inFlight int // acquire calls in progress
	held     int // leases held (until they end: unlocked or lost)
}

func newQuotas(lim Limits) *quotas {
	return &quotas{lim: lim, clients: make(map[string]*usage)}
}

// quotaError is an acquire refused by a client quota (HTTP 429).
type quotaError struct{ msg string }

func (e *quotaError) Error() string { return "admin: " + e.msg }

// begin counts one acquire call of client, or refuses it.
func (q *quotas) begin(client string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	u := q.clients[client]
	if u == nil {
		u = &usage{}
	}
	switch {
	case u.inFlight >= q.lim.MaxInFlightPerClient:
		return &quotaError{fmt.Sprintf("client %s has %d acquire calls in progress (limit %d)", client, u.inFlight, q.lim.MaxInFlightPerClient)}
	case u.inFlight+u.held >= q.lim.MaxHeldPerClient:
		return &quotaError{fmt.Sprintf("client %s holds %d leases and has %d acquire calls in progress (limit %d)", client, u.held, u.inFlight, q.lim.MaxHeldPerClient)}
	case q.total.inFlight+q.total.held >= q.lim.MaxAcquisitions:
		return &quotaError{fmt.Sprintf("the server holds %d leases and has %d acquire calls in progress for all clients (limit %d)", q.total.held, q.total.inFlight, q.lim.MaxAcquisitions)}
	}
	q.clients[client] = u
	u.inFlight++
	q.total.inFlight++
	return nil
}

// end finishes an acquire call counted by begin; granted moves it to the
// client's held leases (until released is called).
func (q *quotas) end(client string, granted bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	u := q.clients[client]
	if u == nil {
		return
	}
	u.inFlight--
	q.total.inFlight--
	if granted {
		u.held++
		q.total.held++
	}
	q.forgetIdleLocked(client, u)
}

// released uncounts a lease of client (it ended).
func (q *quotas) released(client string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	u := q.clients[client]
	if u == nil {
		return
	}
	u.held--
	q.total.held--
	q.forgetIdleLocked(client, u)
}

func (q *quotas) forgetIdleLocked(client string, u *usage) {
	if u.inFlight == 0 && u.held == 0 {
		delete(q.clients, client)
	}
}

// usageOf returns what client has counted (tests, status).
func (q *quotas) usageOf(client string) usage {
	q.mu.Lock()
	defer q.mu.Unlock()
	if u := q.clients[client]; u != nil {
		return *u
	}
	return usage{}
}
