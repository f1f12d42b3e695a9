// Package flood is test machinery: strangers that flood a node's Raft/RPC
// port from chosen loopback source addresses (127.0.0.x, all local on
// Linux), for the regression tests and measurements of the transport's
// inbound limits. Stall holds connections in their TLS handshake (one byte
// sent, then nothing); FailTLS runs TLS handshakes without a client
// certificate, which the node pays for and then refuses.
//
// Every flood runs until Stop, which closes its connections and waits for
// its goroutines.
package flood

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Loopback returns n loopback source addresses 127.0.0.first … (first ≥ 2
// leaves 127.0.0.1, where test nodes run, to the cluster).
func Loopback(first, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("127.0.0.%d", first+i)
	}
	return out
}

// DialFrom opens a TCP connection to addr from source IP src (any port).
func DialFrom(ctx context.Context, src, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: time.Second}
	return d.DialContext(ctx, "tcp", addr)
}

// tlsRecordByte is the first byte of a TLS connection (a handshake record).
const tlsRecordByte = 0x16

// Stall keeps connections open in their TLS handshake.
type Stall struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	open   atomic.Int64
	dials  atomic.Int64
	slots  int

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// StartStall keeps perSource connections from each source IP to each
// target: every connection sends one byte (0x16, the start of a TLS
// handshake record) and then nothing. A connection the target held for a
// while (until a timeout) is dialed again at once, so its slot stays
// taken; one it closed at once (refused over a limit), after backoff.
func StartStall(targets, sources []string, perSource int, backoff time.Duration) *Stall {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Stall{ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	for _, target := range targets {
		for _, src := range sources {
			for range perSource {
				s.slots++
				s.wg.Add(1)
				go s.slot(src, target, backoff)
			}
		}
	}
	return s
}

// refusedWithin: a connection closed this soon after its dial was refused.
const refusedWithin = 100 * time.Millisecond

// slot dials, stalls until closed, and dials again, until Stop.
func (s *Stall) slot(src, target string, backoff time.Duration) {
	defer s.wg.Done()
	for s.ctx.Err() == nil {
		start := time.Now()
		c, err := DialFrom(s.ctx, src, target)
		s.dials.Add(1)
		if err == nil {
			s.hold(c)
		}
		if time.Since(start) < refusedWithin {
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
			}
		}
	}
}

// hold sends the first byte and reads until the target closes c (or Stop).
func (s *Stall) hold(c net.Conn) {
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		c.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	if _, err := c.Write([]byte{tlsRecordByte}); err != nil {
		return
	}
	s.open.Add(1)
	defer s.open.Add(-1)
	var b [512]byte
	for {
		if _, err := c.Read(b[:]); err != nil {
			return
		}
	}
}

// Slots is the number of connections the flood keeps trying to hold.
func (s *Stall) Slots() int { return s.slots }

// Open is the number of connections open now (not yet closed by their
// target).
func (s *Stall) Open() int { return int(s.open.Load()) }

// Dials is the number of dials so far (failed ones included).
func (s *Stall) Dials() int64 { return s.dials.Load() }

// Stop closes every connection and waits for the flood's goroutines.
func (s *Stall) Stop() {
	s.mu.Lock()
	s.cancel()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// FailTLS runs TLS handshakes without a client certificate against a node
// that requires one.
type FailTLS struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	attempts atomic.Int64
	serverOK atomic.Int64 // handshakes the node answered (it paid for them)
}

// StartFailTLS starts rate handshakes per second to target, spread over
// sources in turn, at most inflight at a time (an attempt that finds them
// all busy is skipped). Each dials, runs a TLS client handshake (no
// certificate, the node's not verified) and reads until the node closes
// the connection.
func StartFailTLS(target string, sources []string, rate, inflight int) *FailTLS {
	ctx, cancel := context.WithCancel(context.Background())
	f := &FailTLS{cancel: cancel}
	slots := make(chan struct{}, inflight)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			select {
			case slots <- struct{}{}:
			default:
				continue
			}
			f.attempts.Add(1)
			f.wg.Add(1)
			go func(src string) {
				defer f.wg.Done()
				defer func() { <-slots }()
				f.attempt(ctx, src, target)
			}(sources[i%len(sources)])
		}
	}()
	return f
}

// attempt runs one certificate-less handshake.
func (f *FailTLS) attempt(ctx context.Context, src, target string) {
	c, err := DialFrom(ctx, src, target)
	if err != nil {
		return
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
	if tc.Handshake() == nil {
		f.serverOK.Add(1)
		io.Copy(io.Discard, tc) // TLS 1.3: the node refuses after the client's last flight
	}
}

// Attempts is the number of handshakes started so far.
func (f *FailTLS) Attempts() int64 { return f.attempts.Load() }

// Answered is the number of handshakes the node took through its
// expensive part (it sent its certificate and key share) before refusing.
func (f *FailTLS) Answered() int64 { return f.serverOK.Load() }

// Stop ends the flood and waits for its goroutines.
func (f *FailTLS) Stop() {
	f.cancel()
	f.wg.Wait()
}
