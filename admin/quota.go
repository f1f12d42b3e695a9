package admin

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// clientOf returns the remote address a request comes from (the host part
// of the connection's remote address; forwarding headers are not trusted):
// what the description of an HTTP client's own session names.
func clientOf(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// addrClient returns the quota client of a remote address (ip:port): the
// IP address, an IPv6 one by its /64 (one host's usual allocation, which it
// could otherwise spend an address of per share).
func addrClient(remote string) string {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return ip.String()
	}
	return netip.PrefixFrom(ip, 64).Masked().String()
}

// quotas counts what each client (a principal, or a source address where
// there is none: quotaClientOf) holds (leases), has in flight (acquire
// calls) and keeps waiting (long polls), and refuses a call that would
// exceed Limits. Clients with nothing counted are forgotten, so it costs
// only what is held. Safe for concurrent use.
type quotas struct {
	lim Limits

	mu      sync.Mutex
	clients map[string]*usage
	total   usage
}

type usage struct {
	inFlight int // acquire calls in progress
	held     int // leases held (until they end: unlocked or lost)
	polls    int // long polls in progress: waiting acquires and lease waits
}

func newQuotas(lim Limits) *quotas {
	return &quotas{lim: lim, clients: make(map[string]*usage)}
}

// quotaError is a call refused by a client quota (HTTP 429).
type quotaError struct{ msg string }

func (e *quotaError) Error() string { return "admin: " + e.msg }

// begin counts one acquire call of client, or refuses it.
func (q *quotas) begin(client string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	u := q.usageLocked(client)
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

// beginPoll counts one long poll of client (a waiting acquire, a lease
// wait), or refuses it; endPoll uncounts it.
func (q *quotas) beginPoll(client string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	u := q.usageLocked(client)
	switch {
	case u.polls >= q.lim.MaxPollsPerClient:
		return &quotaError{fmt.Sprintf("client %s has %d waiting calls in progress (limit %d)", client, u.polls, q.lim.MaxPollsPerClient)}
	case q.total.polls >= q.lim.MaxPolls:
		return &quotaError{fmt.Sprintf("the server has %d waiting calls in progress for all clients (limit %d)", q.total.polls, q.lim.MaxPolls)}
	}
	q.clients[client] = u
	u.polls++
	q.total.polls++
	return nil
}

func (q *quotas) endPoll(client string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	u := q.clients[client]
	if u == nil {
		return
	}
	u.polls--
	q.total.polls--
	q.forgetIdleLocked(client, u)
}

// usageLocked returns client's usage, a new one (not yet stored) if it has
// none.
func (q *quotas) usageLocked(client string) *usage {
	if u := q.clients[client]; u != nil {
		return u
	}
	return &usage{}
}

func (q *quotas) forgetIdleLocked(client string, u *usage) {
	if *u == (usage{}) {
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
