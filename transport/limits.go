package transport

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// connLimits decides which inbound connections are admitted (see
// InboundLimits): open connections and connections in their handshake, in
// total and per source, with a reserve that only members' sources may use,
// and a budget of failed handshakes per source and for all strangers
// together. Every admitted connection is charged to the failure budgets
// at once and refunded (succeeded) when its handshake succeeds or is
// refused for a reason that is no failure: so a failure counts before the
// peer can learn of it (a TLS alert) and dial again, and handshakes in
// progress count too. It does no I/O, reads no clock (callers pass a
// monotonic now) and is not safe for concurrent use (the Transport calls
// it under its mutex).
type connLimits struct {
	lim InboundLimits // defaults applied

	conns, handshakes int
	hosts             map[string]*hostLimits
	strangerFails     failBudget // failures of every stranger's source
	sweepAt           int        // len(hosts) at which idle entries are swept
}

// hostLimits is what connLimits counts for one source.
type hostLimits struct {
	conns, handshakes int
	fails             failBudget
}

// newConnLimits returns the planner for limits with defaults applied.
func newConnLimits(lim InboundLimits) connLimits {
	return connLimits{lim: lim, hosts: make(map[string]*hostLimits), sweepAt: minSweep}
}

// minSweep is the number of tracked sources below which idle ones are not
// swept.
const minSweep = 1024

// admit admits a new connection from source key (member: the source is a
// member's) and counts it as open and in its handshake, or returns the
// reason (a rejected-metric label) to refuse it and counts nothing.
func (l *connLimits) admit(key string, member bool, now time.Time) string {
	h := l.hosts[key]
	if h != nil && !h.fails.allows(now, l.lim.FailedHandshakesPerHost) {
		return rejectFailureLimit
	}
	if !member && !l.strangerFails.allows(now, l.lim.FailedHandshakes) {
		return rejectFailureLimit
	}
	maxConns, maxHandshakes, maxHostHandshakes := l.lim.MaxConns, l.lim.MaxHandshakes, l.lim.MaxHandshakesPerHost
	if member {
		maxConns += l.lim.MemberReserve
		maxHandshakes += l.lim.MemberReserve
		maxHostHandshakes += l.lim.MemberReserve / 4
	}
	var hostConns, hostHandshakes int
	if h != nil {
		hostConns, hostHandshakes = h.conns, h.handshakes
	}
	switch {
	case l.conns >= maxConns:
		return rejectConnLimit
	case hostConns >= l.lim.MaxConnsPerHost:
		return rejectHostLimit
	case l.handshakes >= maxHandshakes:
		return rejectHandshakeLimit
	case hostHandshakes >= maxHostHandshakes:
		return rejectHostHandshakeLimit
	}
	if h == nil {
		l.sweep(now)
		h = &hostLimits{}
		l.hosts[key] = h
	}
	l.conns++
	l.handshakes++
	h.conns++
	h.handshakes++
	h.fails.spend(now, l.lim.FailedHandshakesPerHost)
	if !member {
		l.strangerFails.spend(now, l.lim.FailedHandshakes)
	}
	return ""
}

// succeeded refunds the failure charged when a connection from key was
// admitted: its handshake succeeded, or was refused for a reason that is
// no failure. Call it at most once per admitted connection, and not for
// one that failed.
func (l *connLimits) succeeded(key string, member bool, now time.Time) {
	if h := l.hosts[key]; h != nil {
		h.fails.refund(now, l.lim.FailedHandshakesPerHost)
	}
	if !member {
		l.strangerFails.refund(now, l.lim.FailedHandshakes)
	}
}

// handshakeDone moves an admitted connection from key out of its handshake.
func (l *connLimits) handshakeDone(key string) {
	l.handshakes--
	if h := l.hosts[key]; h != nil {
		h.handshakes--
	}
}

// release forgets an admitted connection from key that closed;
// handshaking says whether it was still in its handshake. The source's
// entry stays while its failure budget is not full again (see sweep).
func (l *connLimits) release(key string, handshaking bool) {
	l.conns--
	if handshaking {
		l.handshakes--
	}
	h := l.hosts[key]
	if h == nil {
		return
	}
	h.conns--
	if handshaking {
		h.handshakes--
	}
	if h.conns <= 0 && h.fails.untouched() {
		delete(l.hosts, key)
	}
}

// sweep forgets sources without connections whose failure budget is full
// again, once the table has doubled since the last sweep (amortised O(1)
// per admitted connection). The table holds at most the sources with open
// connections plus those that failed within the last failureBurstSeconds
// — and a stranger's failure is admitted only within the strangers'
// budget.
func (l *connLimits) sweep(now time.Time) {
	if len(l.hosts) < l.sweepAt {
		return
	}
	for k, h := range l.hosts {
		if h.conns <= 0 && h.fails.full(now, l.lim.FailedHandshakesPerHost) {
			delete(l.hosts, k)
		}
	}
	l.sweepAt = max(2*len(l.hosts), minSweep)
}

// failBudget is a token bucket of failed handshakes: rate per second,
// saving up to failureBurstSeconds of it. The zero value is full.
type failBudget struct {
	spent float64   // failures (and attempts in progress) not yet earned back
	at    time.Time // when spent was last brought up to date
}

// settle earns back what rate allows since the last update.
func (b *failBudget) settle(now time.Time, rate int) {
	if b.spent > 0 && !b.at.IsZero() {
		b.spent = max(0, b.spent-now.Sub(b.at).Seconds()*float64(rate))
	}
	b.at = now
}

// allows reports whether one more failure fits into the budget.
func (b *failBudget) allows(now time.Time, rate int) bool {
	b.settle(now, rate)
	return b.spent+1 <= float64(rate*failureBurstSeconds)
}

// spend charges one failure.
func (b *failBudget) spend(now time.Time, rate int) {
	b.settle(now, rate)
	b.spent++
}

// refund returns a charged failure that was none.
func (b *failBudget) refund(now time.Time, rate int) {
	b.settle(now, rate)
	b.spent = max(0, b.spent-1)
}

// full reports whether every failure was earned back.
func (b *failBudget) full(now time.Time, rate int) bool {
	b.settle(now, rate)
	return b.spent == 0
}

// untouched reports whether the budget is known to be full.
func (b *failBudget) untouched() bool { return b.spent == 0 }

// remoteHost is the source address of an accepted connection: its IP in
// canonical form (an IPv4-mapped IPv6 address as IPv4), or the remote
// address without the port for other networks.
func remoteHost(c net.Conn) string {
	a := c.RemoteAddr()
	if tcp, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(tcp.IP); ok {
			return ip.Unmap().String()
		}
		return tcp.IP.String()
	}
	if h, _, err := net.SplitHostPort(a.String()); err == nil {
		return h
	}
	return a.String()
}

// limitKey is the key under which a source is limited: a member's address
// as it is, a stranger's IPv6 address by its /64 prefix (one attacker
// commonly holds a whole /64).
func limitKey(host string, member bool) string {
	if member {
		return host
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.Is6() || ip.IsLoopback() {
		return host
	}
	p, err := ip.Prefix(64)
	if err != nil {
		return host
	}
	return p.String()
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
