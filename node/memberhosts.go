package node

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
// every memberHostsEvery and at once when gossip reports a change, so a
// server added to the configuration is recognised within a second.
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

// memberHosts is the set of members' source addresses the transport asks
// about (has), and the loop that keeps it up to date.
type memberHosts struct {
	set  atomic.Pointer[map[string]bool]
	poke chan struct{}
	// names: host name → its addresses as last resolved (loop only).
	names map[string]resolvedName
}

type resolvedName struct {
	addrs []string
	at    time.Time
}

func newMemberHosts() *memberHosts {
	return &memberHosts{poke: make(chan struct{}, 1), names: map[string]resolvedName{}}
}

// has reports whether host (an IP in canonical form, or on other networks
// a name) is a member's source address: transport.Config.MemberHost.
func (h *memberHosts) has(host string) bool {
	if s := h.set.Load(); s != nil {
		return (*s)[host]
	}
	return false
}

// wake asks the loop to rebuild the set now. It never blocks.
func (h *memberHosts) wake() {
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

// memberAddrs lists the addresses of the members this node knows of, and
// which of them come from its own configuration or the Raft log (their
// host names may be looked up; names that gossip metadata claims are not).
func (n *Node) memberAddrs() ([]string, map[string]bool) {
	var addrs []string
	trusted := map[string]bool{}
	for _, p := range n.cfg.Peers {
		addrs = append(addrs, p.Addr)
		trusted[p.Addr] = true
	}
	if conf, ok := n.latestConfig(); ok {
		for _, s := range conf.Servers {
			addrs = append(addrs, string(s.Address))
			trusted[string(s.Address)] = true
		}
	}
	if n.members != nil {
		addrs = append(addrs, n.members.MemberAddrs()...)
	}
	return addrs, trusted
}

// refreshMemberHosts rebuilds the member address set.
func (n *Node) refreshMemberHosts(ctx context.Context) {
	h := n.memberHosts
	var resolve func(string) []string
	used := map[string]resolvedName{}
	if n.resolvesNames() {
		resolve = func(name string) []string {
			r := h.lookup(ctx, name)
			used[name] = r
			return r.addrs
		}
	}
	addrs, trusted := n.memberAddrs()
	set := memberHostSet(addrs, trusted, resolve)
	h.names = used // forget names no longer listed
	h.set.Store(&set)
}

// resolvesNames reports whether member host names are looked up: only
// over TCP (other networks, such as the in-memory test network, name
// their hosts themselves).
func (n *Node) resolvesNames() bool {
	if n.cfg.Listener == nil {
		return true
	}
	_, ok := n.cfg.Listener.Addr().(*net.TCPAddr)
	return ok
}

// lookup returns name's addresses, looked up at most every resolveEvery
// (a failed lookup keeps the previous answer). Loop only.
func (h *memberHosts) lookup(ctx context.Context, name string) resolvedName {
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

// watchMemberHosts keeps the member address set up to date until the node
// closes.
func (n *Node) watchMemberHosts() {
	defer n.wg.Done()
	t := time.NewTicker(memberHostsEvery)
	defer t.Stop()
	for {
		n.refreshMemberHosts(n.ctx)
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		case <-n.memberHosts.poke:
		}
	}
}
