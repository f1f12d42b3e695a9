package memnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
)

// DefaultBufferSize is the number of bytes a connection buffers in each
// direction before Write blocks (the analogue of socket buffers).
const DefaultBufferSize = 256 << 10

// firstEphemeralPort is the first port handed out for ":0" listens and for
// the local side of dialed connections.
const firstEphemeralPort = 40000

// ErrNetworkClosed is returned by Listen and Dial after Network.Close.
var ErrNetworkClosed = errors.New("memnet: network closed")

// errReset is the error that reads and writes return on a connection that was
// reset by DropConns, by healing a cut that lost bytes, or by Network.Close.
var errReset = &net.OpError{Op: "read", Net: NetworkName, Err: syscall.ECONNRESET}

// NetworkName is the network name that memnet addresses report.
const NetworkName = "memnet"

// Network is an in-memory network of named hosts. The zero value is not usable;
// create one with New. All methods are safe for concurrent use.
type Network struct {
	bufSize int

	// faults is the current, immutable fault state. Writers load it while
	// holding their pipe's mutex; fault changes store a new one and then visit
	// every pipe (taking each pipe's mutex), so no lost write is missed.
	faults atomic.Pointer[faultState]

	mu        sync.Mutex
	closed    bool
	listeners map[string]*listener
	pipes     map[*pipe]struct{}
	nextPort  int
	nextFlow  uint64
	changed   chan struct{} // closed and replaced whenever faults change
	taps      []*Tap        // recording connections made from now on (tap.go)
}

// New returns an empty network whose connections buffer DefaultBufferSize
// bytes in each direction. Create it inside the synctest bubble that uses it.
func New() *Network {
	return NewWithBuffer(DefaultBufferSize)
}

// NewWithBuffer is like New with a per-direction buffer of size bytes
// (minimum 1).
func NewWithBuffer(size int) *Network {
	if size < 1 {
		size = 1
	}
	n := &Network{
		bufSize:   size,
		listeners: make(map[string]*listener),
		pipes:     make(map[*pipe]struct{}),
		nextPort:  firstEphemeralPort,
		changed:   make(chan struct{}),
	}
	n.faults.Store(&faultState{})
	return n
}

// Host returns a handle for the host called name. Hosts need no
// registration: any name is valid, and two handles with the same name are
// the same host.
func (n *Network) Host(name string) *Host { return &Host{net: n, name: name} }

// Listen listens on addr for the host named by addr's host part (the text
// before the last colon, or all of addr if it has no colon). It is a shortcut
// for n.Host(host).Listen(addr).
func (n *Network) Listen(addr string) (net.Listener, error) {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	return n.Host(host).Listen(addr)
}

// Close resets every connection and closes every listener of the network.
// Later Listen and Dial calls fail with ErrNetworkClosed. Idempotent.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	ls := make([]*listener, 0, len(n.listeners))
	for _, l := range n.listeners {
		ls = append(ls, l)
	}
	ps := n.pipeList()
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	for _, p := range ps {
		p.reset()
	}
	return nil
}

// pipeList returns a snapshot of the live pipes. Caller holds n.mu.
func (n *Network) pipeList() []*pipe {
	ps := make([]*pipe, 0, len(n.pipes))
	for p := range n.pipes {
		ps = append(ps, p)
	}
	return ps
}

// Host is one named host of a Network. Its methods are safe for concurrent use.
type Host struct {
	net  *Network
	name string
}

// Name returns the host's name.
func (h *Host) Name() string { return h.name }

// Listen listens on addr, an arbitrary non-empty string (by convention
// "host:port"). An address ending in ":0" gets a fresh port. Listening on an
// address that is in use fails.
func (h *Host) Listen(addr string) (net.Listener, error) {
	n := h.net
	if addr == "" {
		return nil, errors.New("memnet: empty listen address")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, ErrNetworkClosed
	}
	if hp, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
		addr = net.JoinHostPort(hp, strconv.Itoa(n.port()))
	}
	if _, ok := n.listeners[addr]; ok {
		return nil, &net.OpError{Op: "listen", Net: NetworkName, Addr: Addr(addr), Err: syscall.EADDRINUSE}
	}
	l := &listener{
		net:     n,
		host:    h.name,
		addr:    Addr(addr),
		backlog: make(chan *Conn, 128),
		done:    make(chan struct{}),
	}
	n.listeners[addr] = l
	return l, nil
}

// port returns a fresh port number. Caller holds n.mu.
func (n *Network) port() int {
	p := n.nextPort
	n.nextPort++
	return p
}

// Dial connects from this host to the listener at addr. It fails at once
// with ECONNREFUSED when nothing listens there. While either direction
// between the two hosts is cut, it hangs until the cut heals or ctx ends
// (then it returns an error wrapping ctx.Err()). Configured delays in both
// directions are waited out first, like a TCP handshake round trip.
func (h *Host) Dial(ctx context.Context, addr string) (net.Conn, error) {
	n := h.net
	opErr := func(err error) error {
		return &net.OpError{Op: "dial", Net: NetworkName, Addr: Addr(addr), Err: err}
	}
	for {
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			return nil, opErr(ErrNetworkClosed)
		}
		l := n.listeners[addr]
		if l == nil {
			n.mu.Unlock()
			return nil, opErr(syscall.ECONNREFUSED)
		}
		f := n.faults.Load()
		if f.cut(h.name, l.host) || f.cut(l.host, h.name) {
			changed := n.changed
			n.mu.Unlock()
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return nil, opErr(fmt.Errorf("memnet: dial blocked by a network cut: %w", ctx.Err()))
			}
		}
		rtt := f.delay(h.name, l.host) + f.delay(l.host, h.name)
		n.mu.Unlock()
		if rtt > 0 {
			if err := sleepCtx(ctx, rtt); err != nil {
				return nil, opErr(err)
			}
			// Re-check the cut and the listener after the round trip.
			n.mu.Lock()
			if n.closed || n.listeners[addr] != l || n.faults.Load().cut(h.name, l.host) || n.faults.Load().cut(l.host, h.name) {
				n.mu.Unlock()
				continue
			}
			n.mu.Unlock()
		}
		if err := ctx.Err(); err != nil {
			return nil, opErr(err)
		}
		c, err := n.connect(h.name, l)
		if errors.Is(err, errRetry) {
			continue
		}
		if err != nil {
			return nil, opErr(err)
		}
		return c, nil
	}
}

// errRetry tells Dial to start over (the listener went away meanwhile).
var errRetry = errors.New("memnet: retry dial")

// connect creates a connection between host from and listener l, queues the
// accepting end on l and returns the dialing end.
func (n *Network) connect(from string, l *listener) (*Conn, error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, ErrNetworkClosed
	}
	if n.listeners[l.addr.String()] != l {
		n.mu.Unlock()
		return nil, errRetry
	}
	localAddr := Addr(net.JoinHostPort(from, strconv.Itoa(n.port())))
	p := newPipe(n, [2]string{from, l.host})
	n.nextFlow++
	p.id, p.addr = n.nextFlow, l.addr.String()
	p.taps = n.tapsFor(from, l.host, FlowInfo{ID: p.id, From: from, To: l.host, Addr: p.addr})
	dialer := &Conn{p: p, side: 0, laddr: localAddr, raddr: l.addr}
	acceptor := &Conn{p: p, side: 1, laddr: l.addr, raddr: localAddr}
	p.ends = [2]*Conn{dialer, acceptor}
	n.pipes[p] = struct{}{}
	n.mu.Unlock()

	if err := l.enqueue(acceptor); err != nil {
		p.reset()
		return nil, err
	}
	return dialer, nil
}

// removePipe forgets a pipe that is fully closed or reset.
func (n *Network) removePipe(p *pipe) {
	n.mu.Lock()
	delete(n.pipes, p)
	n.mu.Unlock()
}

// Addr is a memnet address. It implements net.Addr.
type Addr string

// Network returns "memnet".
func (a Addr) Network() string { return NetworkName }

// String returns the address text.
func (a Addr) String() string { return string(a) }
