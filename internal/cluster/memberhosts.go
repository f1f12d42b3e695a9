package cluster

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"
)

// Member addresses. The transport keeps handshake slots that only
// members' source addresses may use (transport.InboundLimits.MemberReserve),
// so that strangers flooding the port cannot starve elections, re-dials
// and new members of handshakes. The node tells it which addresses are
// members' (transport.Config.MemberHost): the hosts of its static Peers,
// of the servers of its latest Raft configuration, and of its gossip
// members (their gossip and Raft addresses, and the remembered known
// peers). Host names are resolved (over TCP only). The set is rebuilt
// every memberHostsEvery and at once when gossip reports a change (Wake),
// so a server added to the configuration is recognised within a second.
//
// Members are recognised by source IP: a member must dial from the address
// it advertises (the transport's default dialer dials from the listener's
// IP when it is bound to one).

const (
	// memberHostsEvery: the member addresses are rebuilt this often.
	memberHostsEvery = time.Second
	// resolveEvery: a host name is looked up again after this long.
	resolveEvery = 30 * time.Second
	// resolveTimeout bounds one lookup.
	resolveTimeout = 2 * time.Second
)

// MemberHosts is the set of members' source addresses the transport asks
// about (Has), and the loop that keeps it up to date (Run).
type MemberHosts struct {
	set  atomic.Pointer[map[string]bool]
	poke chan struct{}
	// names: host name → its addresses as last resolved (loop only).
	names map[string]resolvedName
}

type resolvedName struct {
	addrs []string
	at    time.Time
}

// NewMemberHosts returns the set of the members at addrs (see
// memberHostSet; no names resolved yet).
func NewMemberHosts(addrs []string) *MemberHosts {
	h := &MemberHosts{poke: make(chan struct{}, 1), names: map[string]resolvedName{}}
	initial := memberHostSet(addrs, nil, nil)
	h.set.Store(&initial)
	return h
}

// Has reports whether host (an IP in canonical form, or on other networks
// a name) is a member's source address: transport.Config.MemberHost.
func (h *MemberHosts) Has(host string) bool {
	if s := h.set.Load(); s != nil {
		return (*s)[host]
	}
	return false
}

// Wake asks the loop to rebuild the set now. It never blocks.
func (h *MemberHosts) Wake() {
	if h == nil {
		return
	}
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

// memberHostSet returns the source addresses of the members at addrs
// ("host:port", or a bare host): IPs in canonical form (IPv4-mapped as
// IPv4), names as given (lower case) plus, for those in resolvable, what
// resolve returns for them (nil: names are not resolved).
func memberHostSet(addrs []string, resolvable map[string]bool, resolve func(name string) []string) map[string]bool {
	set := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		host := a
		if h, _, err := net.SplitHostPort(a); err == nil {
			host = h
		}
		if host == "" {
			continue
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			set[ip.Unmap().String()] = true
			continue
		}
		name := strings.ToLower(host)
		set[name] = true
		if resolve != nil && resolvable[a] {
			for _, ip := range resolve(name) {
				set[ip] = true
			}
		}
	}
	return set
}

// lookup returns name's addresses, looked up at most every resolveEvery
// (a failed lookup keeps the previous answer). Loop only.
func (h *MemberHosts) lookup(ctx context.Context, name string) resolvedName {
	r, ok := h.names[name]
	if ok && time.Since(r.at) < resolveEvery {
		return r
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	if ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", name); err == nil {
		r.addrs = make([]string, 0, len(ips))
		for _, ip := range ips {
			r.addrs = append(r.addrs, ip.Unmap().String())
		}
	}
	r.at = time.Now()
	return r
}

// Run keeps the set up to date until ctx ends: every memberHostsEvery, and
// at once after Wake. sources lists the members' addresses and which of
// them may have their host names looked up (those from the node's own
// configuration or the Raft log; names gossip metadata claims are not);
// resolve says whether names are looked up at all (over TCP only: other
// networks, such as the in-memory test network, name their hosts
// themselves).
func (h *MemberHosts) Run(ctx context.Context, sources func() ([]string, map[string]bool), resolve bool) {
	t := time.NewTicker(memberHostsEvery)
	defer t.Stop()
	for {
		h.refresh(ctx, sources, resolve)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.poke:
		}
	}
}

// refresh rebuilds the member address set.
func (h *MemberHosts) refresh(ctx context.Context, sources func() ([]string, map[string]bool), resolveNames bool) {
	var resolve func(string) []string
	used := map[string]resolvedName{}
	if resolveNames {
		resolve = func(name string) []string {
			r := h.lookup(ctx, name)
			used[name] = r
			return r.addrs
		}
	}
	addrs, trusted := sources()
	set := memberHostSet(addrs, trusted, resolve)
	h.names = used // forget names no longer listed
	h.set.Store(&set)
}
