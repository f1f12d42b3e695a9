package proc

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// This kernel has no netem qdisc, so latency, jitter and loss between
// replica processes are injected by a TCP relay: every replica advertises
// its relay's address as its Raft/RPC address, so every Raft and RPC
// connection to it passes through the relay, which forwards it to the
// replica's real port. Gossip (UDP) goes direct.
//
// Faults are set per source replica (known by its address in the network
// namespaces; over loopback every source looks the same and only the
// faults of source "" apply). A TCP relay cannot lose bytes without
// corrupting the stream, so loss is what TCP makes of it: with probability
// Loss a chunk is held for a retransmission timeout (200–600 ms), and with
// probability Loss/20 the connection is reset. Bytes keep their order.

// linkFaults are the faults of one direction of one link.
type linkFaults struct {
	Latency time.Duration // added to every chunk
	Jitter  time.Duration // plus a random [0, Jitter) per chunk (order kept)
	Loss    float64       // chunk held for a retransmission timeout
	Cut     bool          // no bytes pass; connections are reset
}

func (f linkFaults) zero() bool { return f == linkFaults{} }

// relay forwards connections to one replica's Raft/RPC port.
type relay struct {
	ln     net.Listener
	target string
	source func(remote net.Addr) string // the source replica's host

	mu     sync.Mutex
	rng    *rand.Rand
	to     map[string]linkFaults // bytes from source → target
	from   map[string]linkFaults // bytes from target → source
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func newRelay(listen, target string, seed uint64, source func(net.Addr) string) (*relay, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	r := &relay{ln: ln, target: target, source: source, rng: rand.New(rand.NewPCG(seed, 0x3c6ef372)),
		to: map[string]linkFaults{}, from: map[string]linkFaults{}, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

func (r *relay) addr() string { return r.ln.Addr().String() }

// set replaces the faults of the link between source and the target:
// toTarget for the bytes the source sends, fromTarget for the replies. A
// cut resets the link's connections at once.
func (r *relay) set(source string, toTarget, fromTarget linkFaults) {
	r.mu.Lock()
	r.to[source], r.from[source] = toTarget, fromTarget
	var reset []net.Conn
	if toTarget.Cut || fromTarget.Cut {
		for c := range r.conns {
			if r.source(c.RemoteAddr()) == source {
				reset = append(reset, c)
			}
		}
	}
	r.mu.Unlock()
	for _, c := range reset {
		c.Close()
	}
}

// clear removes every fault.
func (r *relay) clear() {
	r.mu.Lock()
	r.to, r.from = map[string]linkFaults{}, map[string]linkFaults{}
	r.mu.Unlock()
}

// faults returns the current faults of one direction for a source.
func (r *relay) faults(source string, toTarget bool) linkFaults {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.from
	if toTarget {
		m = r.to
	}
	if f, ok := m[source]; ok {
		return f
	}
	return m[""]
}

func (r *relay) float() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.Float64()
}

func (r *relay) duration(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Duration(r.rng.Int64N(int64(d)))
}

func (r *relay) track(c net.Conn, add bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if add {
		if r.closed {
			return false
		}
		r.conns[c] = struct{}{}
	} else {
		delete(r.conns, c)
	}
	return true
}

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		src := r.source(c.RemoteAddr())
		if r.faults(src, true).Cut || !r.track(c, true) {
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", r.target, 5*time.Second)
		if err != nil || !r.track(up, true) {
			c.Close()
			r.track(c, false)
			if up != nil {
				up.Close()
			}
			continue
		}
		r.wg.Add(2)
		go r.pump(c, up, src, true)
		go r.pump(up, c, src, false)
	}
}

// chunk is bytes due for delivery at a time.
type chunk struct {
	b   []byte
	due time.Time
}

// pump copies src to dst with the link's faults; when either side ends,
// both connections are closed.
func (r *relay) pump(src, dst net.Conn, source string, toTarget bool) {
	defer r.wg.Done()
	q := make(chan chunk, 256)
	done := make(chan struct{})
	go func() { // the writer: delivers in order, each chunk at its time
		defer close(done)
		for ch := range q {
			if d := time.Until(ch.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(ch.b); err != nil {
				return
			}
		}
	}()
	var last time.Time
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			f := r.faults(source, toTarget)
			if f.Cut || (f.Loss > 0 && r.float() < f.Loss/20) {
				break // a reset
			}
			due := time.Now()
			if !f.zero() {
				due = due.Add(f.Latency + r.duration(f.Jitter))
				if f.Loss > 0 && r.float() < f.Loss {
					due = due.Add(200*time.Millisecond + r.duration(400*time.Millisecond))
				}
			}
			if due.Before(last) {
				due = last
			}
			last = due
			select {
			case q <- chunk{b: append([]byte(nil), buf[:n]...), due: due}:
			case <-done:
				err = io.ErrClosedPipe
			}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-done
	src.Close()
	dst.Close()
	r.track(src, false)
	r.track(dst, false)
}

// close stops the relay and resets every connection through it.
func (r *relay) close() error {
	r.mu.Lock()
	r.closed = true
	conns := make([]net.Conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	err := r.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	r.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// relayPort is the port of replica i's relay (on the relay host; distinct
// for every replica, and clear of the replicas' own ports).
func relayPort(n network, i int) int { return n.Port(i, 0) + 5 + i }

// tcpAddr is an address at host, for network.Source.
func tcpAddr(host string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(host)} }
