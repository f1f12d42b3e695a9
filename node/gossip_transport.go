package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// streamTransport is a memberlist Transport over one net.Listener and a
// dialer (Config.GossipListener, GossipDialer): streams are connections, and
// so is every packet (a one-shot connection, sent in the background and
// dropped on failure, like a datagram). It lets gossip run on an in-memory
// test network, inside testing/synctest.
//
// Each connection starts with one byte: 's' (a stream follows) or 'p'
// (a packet: the sender's address length (2 bytes) and address, then the
// payload up to EOF).
type streamTransport struct {
	ln      net.Listener
	dial    func(ctx context.Context, addr string) (net.Conn, error)
	timing  GossipTiming
	packets chan *memberlist.Packet
	streams chan net.Conn

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	self   string // advertised address (set by FinalAdvertiseAddr)
}

const maxGossipPacket = 1 << 20

func newStreamTransport(ln net.Listener, dial func(context.Context, string) (net.Conn, error), t GossipTiming) *streamTransport {
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	st := &streamTransport{ln: ln, dial: dial, timing: t, packets: make(chan *memberlist.Packet), streams: make(chan net.Conn)}
	st.ctx, st.cancel = context.WithCancel(context.Background())
	st.wg.Add(1)
	go st.accept()
	return st
}

// FinalAdvertiseAddr implements memberlist.Transport.
func (t *streamTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	if ip == "" {
		host, p, err := net.SplitHostPort(t.ln.Addr().String())
		if err != nil {
			return nil, 0, err
		}
		ip = host
		if port, err = strconv.Atoi(p); err != nil {
			return nil, 0, err
		}
	}
	addr := net.ParseIP(ip)
	if addr == nil {
		return nil, 0, fmt.Errorf("gossip address %q is not an IP address", ip)
	}
	t.mu.Lock()
	t.self = net.JoinHostPort(ip, strconv.Itoa(port))
	t.mu.Unlock()
	return addr, port, nil
}

// WriteTo implements memberlist.Transport: the packet is sent in the
// background.
func (t *streamTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return time.Time{}, errors.New("gossip transport closed")
	}
	self := t.self
	t.wg.Add(1)
	t.mu.Unlock()
	msg := make([]byte, 0, 3+len(self)+len(b))
	msg = append(msg, 'p')
	msg = binary.BigEndian.AppendUint16(msg, uint16(len(self)))
	msg = append(append(msg, self...), b...)
	go func() {
		defer t.wg.Done()
		ctx, cancel := context.WithTimeout(t.ctx, t.timing.ProbeTimeout)
		defer cancel()
		c, err := t.dial(ctx, addr)
		if err != nil {
			return
		}
		defer c.Close()
		c.SetWriteDeadline(time.Now().Add(t.timing.ProbeTimeout))
		c.Write(msg)
	}()
	return time.Now(), nil
}

// PacketCh implements memberlist.Transport.
func (t *streamTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

// DialTimeout implements memberlist.Transport.
func (t *streamTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(t.ctx, timeout)
	defer cancel()
	c, err := t.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte{'s'}); err != nil {
		c.Close()
		return nil, err
	}
	c.SetWriteDeadline(time.Time{})
	return c, nil
}

// StreamCh implements memberlist.Transport.
func (t *streamTransport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown implements memberlist.Transport: it returns once every goroutine
// of the transport has ended. Idempotent.
func (t *streamTransport) Shutdown() error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.cancel()
	t.ln.Close()
	t.wg.Wait()
	return nil
}

func (t *streamTransport) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			return
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			c.Close()
			return
		}
		t.wg.Add(1)
		t.mu.Unlock()
		go t.serve(c)
	}
}

func (t *streamTransport) serve(c net.Conn) {
	defer t.wg.Done()
	c.SetReadDeadline(time.Now().Add(t.timing.TCPTimeout))
	var kind [1]byte
	if _, err := io.ReadFull(c, kind[:]); err != nil {
		c.Close()
		return
	}
	switch kind[0] {
	case 's':
		c.SetReadDeadline(time.Time{})
		select {
		case t.streams <- c:
		case <-t.ctx.Done():
			c.Close()
		}
	case 'p':
		defer c.Close()
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		from := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, from); err != nil {
			return
		}
		buf, err := io.ReadAll(io.LimitReader(c, maxGossipPacket))
		if err != nil || len(buf) == 0 {
			return
		}
		now := time.Now()
		var addr net.Addr = c.RemoteAddr()
		if ap, err := netip.ParseAddrPort(string(from)); err == nil {
			addr = net.UDPAddrFromAddrPort(ap)
		}
		select {
		case t.packets <- &memberlist.Packet{Buf: buf, From: addr, Timestamp: now}:
		case <-t.ctx.Done():
		}
	default:
		c.Close()
	}
}

// netTransport is memberlist's UDP/TCP transport whose dials end when it
// shuts down, so that closing a node never waits out a dial to an
// unreachable seed or member.
type netTransport struct {
	*memberlist.NetTransport
	ctx    context.Context
	cancel context.CancelFunc
}

// newNetTransport binds UDP and TCP on host:port (port 0: the same free port
// for both, retried like memberlist does).
func newNetTransport(host string, port int, logger *log.Logger) (*netTransport, error) {
	nc := &memberlist.NetTransportConfig{BindAddrs: []string{host}, BindPort: port, Logger: logger}
	attempts := 1
	if port == 0 {
		attempts = 10
	}
	var err error
	for range attempts {
		var nt *memberlist.NetTransport
		if nt, err = memberlist.NewNetTransport(nc); err == nil {
			t := &netTransport{NetTransport: nt}
			t.ctx, t.cancel = context.WithCancel(context.Background())
			return t, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, err
}

// DialTimeout implements memberlist.Transport.
func (t *netTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *netTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.DialContext(t.ctx, "tcp", a.Addr)
}

// Shutdown implements memberlist.Transport.
func (t *netTransport) Shutdown() error {
	t.cancel()
	return t.NetTransport.Shutdown()
}
