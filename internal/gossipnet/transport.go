package gossipnet

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

// Stream is a memberlist.Transport over one net.Listener and a dialer:
// streams are connections, and so is every packet (see the package doc for
// the framing). Its methods are safe for concurrent use, as memberlist
// requires.
type Stream struct {
	ln            net.Listener
	dial          func(ctx context.Context, addr string) (net.Conn, error)
	packetTimeout time.Duration
	readTimeout   time.Duration
	packets       chan *memberlist.Packet
	streams       chan net.Conn

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	self   string // advertised address (set by FinalAdvertiseAddr)
}

// MaxPacket is the largest packet payload a Stream accepts; the rest of a
// longer one is dropped.
const MaxPacket = 1 << 20

// NewStream returns a transport that accepts on ln and dials with dial (nil:
// TCP). packetTimeout bounds the dial and write of one packet (memberlist's
// probe timeout is a good value: a later packet is useless), readTimeout how
// long an accepted connection may take to say what it is. The transport owns
// ln: Shutdown closes it.
func NewStream(ln net.Listener, dial func(ctx context.Context, addr string) (net.Conn, error), packetTimeout, readTimeout time.Duration) *Stream {
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	st := &Stream{ln: ln, dial: dial, packetTimeout: packetTimeout, readTimeout: readTimeout, packets: make(chan *memberlist.Packet), streams: make(chan net.Conn)}
	st.ctx, st.cancel = context.WithCancel(context.Background())
	st.wg.Add(1)
	go st.accept()
	return st
}

// FinalAdvertiseAddr implements memberlist.Transport.
func (t *Stream) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
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
func (t *Stream) WriteTo(b []byte, addr string) (time.Time, error) {
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
		ctx, cancel := context.WithTimeout(t.ctx, t.packetTimeout)
		defer cancel()
		c, err := t.dial(ctx, addr)
		if err != nil {
			return
		}
		defer c.Close()
		c.SetWriteDeadline(time.Now().Add(t.packetTimeout))
		c.Write(msg)
	}()
	return time.Now(), nil
}

// PacketCh implements memberlist.Transport.
func (t *Stream) PacketCh() <-chan *memberlist.Packet { return t.packets }

// DialTimeout implements memberlist.Transport.
func (t *Stream) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
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
func (t *Stream) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown implements memberlist.Transport: it returns once every goroutine
// of the transport has ended. Idempotent.
func (t *Stream) Shutdown() error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.cancel()
	t.ln.Close()
	t.wg.Wait()
	return nil
}

func (t *Stream) accept() {
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

func (t *Stream) serve(c net.Conn) {
	defer t.wg.Done()
	c.SetReadDeadline(time.Now().Add(t.readTimeout))
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
		buf, err := io.ReadAll(io.LimitReader(c, MaxPacket))
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

// Net is memberlist's UDP/TCP transport whose dials end when it shuts down,
// so that closing a node never waits out a dial to an unreachable seed or
// member. Safe for concurrent use.
type Net struct {
	*memberlist.NetTransport
	ctx    context.Context
	cancel context.CancelFunc
}

// NewNet binds UDP and TCP on host:port (port 0: the same free port for
// both, retried like memberlist does).
func NewNet(host string, port int, logger *log.Logger) (*Net, error) {
	nc := &memberlist.NetTransportConfig{BindAddrs: []string{host}, BindPort: port, Logger: logger}
	attempts := 1
	if port == 0 {
		attempts = 10
	}
	var err error
	for range attempts {
		var nt *memberlist.NetTransport
		if nt, err = memberlist.NewNetTransport(nc); err == nil {
			t := &Net{NetTransport: nt}
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
func (t *Net) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *Net) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.DialContext(t.ctx, "tcp", a.Addr)
}

// Shutdown implements memberlist.Transport.
func (t *Net) Shutdown() error {
	t.cancel()
	return t.NetTransport.Shutdown()
}
