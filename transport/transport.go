package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// wallClock reads the wall clock, for timestamps shown to people
// (Refusal.At). Nothing that decides liveness or a deadline reads it: Go
// timers and deadlines run on the monotonic clock. Tests step it to prove
// that.
var wallClock = time.Now

// connKind is what an accepted or dialed raw connection is used for.
type connKind uint8

const (
	connHandshake connKind = iota // accepted, preface not read yet
	connRaft
	connRPC
)

// Transport is one node's endpoint: a single listener whose connections
// carry either Raft traffic (see StreamLayer, RaftTransport) or forwarding
// RPCs (see Call, HandlerFunc), optionally all under mutual TLS.
//
// All methods are safe for concurrent use. Close releases everything.
type Transport struct {
	cfg       Config
	log       *slog.Logger
	metrics   *metrics
	ln        net.Listener
	advertise string
	serverTLS *tls.Config // nil = plaintext
	handler   HandlerFunc
	stream    *streamLayer

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the Transport starts

	refusals refusals    // recent identity refusals (own lock)
	legacy   legacyPeers // addresses that refused version 2 (own lock)
	limitLog rateLog     // rate limit of the connection-limit warnings

	mu       sync.Mutex
	closed   bool
	conns    map[net.Conn]*connInfo // raw conns, accepted and dialed
	limits   connLimits             // admission of inbound conns
	frames   *frameBudget           // RPC frame bytes of all inbound conns (own lock)
	peers    map[string]*peer       // RPC client pools by address
	raftNT   *raft.NetworkTransport
	raftOnce sync.Once
}

// connInfo is what the Transport knows about a tracked raw connection.
type connInfo struct {
	kind    connKind
	inbound bool   // accepted (counted in limits until untracked)
	key     string // inbound: the source's limit key (limitKey)
	member  bool   // inbound: the source is a member's (Config.MemberHost)
	// charged: inbound, charged to the failure budgets until its handshake
	// succeeds or is refused for a reason that is no failure (see
	// connLimits).
	charged bool
}

// New validates cfg, starts listening (or takes over cfg.Listener) and
// accepting connections, and returns the Transport. handler serves
// incoming Calls; it may be nil, in which case callers get an error
// wrapping errNoHandler.
func New(cfg Config, handler HandlerFunc) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	ln := cfg.Listener
	if ln == nil {
		ln, err = net.Listen("tcp", cfg.BindAddr)
		if err != nil {
			m.unregister(cfg.Registerer)
			return nil, fmt.Errorf("transport: listen on %s: %w", cfg.BindAddr, err)
		}
	}
	advertise := cfg.AdvertiseAddr
	if advertise == "" {
		advertise = ln.Addr().String()
		if err := checkAdvertise(advertise); err != nil {
			ln.Close()
			m.unregister(cfg.Registerer)
			return nil, fmt.Errorf("transport: set AdvertiseAddr: listener address %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{
		cfg:       cfg,
		log:       cfg.Logger,
		metrics:   m,
		ln:        ln,
		advertise: advertise,
		handler:   handler,
		ctx:       ctx,
		cancel:    cancel,
		conns:     make(map[net.Conn]*connInfo),
		peers:     make(map[string]*peer),
		limits:    newConnLimits(cfg.Inbound),
		frames:    newFrameBudget(cfg.Inbound.MaxFrameBytes),
	}
	if cfg.TLS != nil {
		t.serverTLS = serverTLS(cfg.TLS)
	}
	t.stream = newStreamLayer(t)
	t.goTracked(t.acceptLoop)
	return t, nil
}

// Addr returns the advertise address: the "host:port" peers dial, and this
// node's Raft ServerAddress.
func (t *Transport) Addr() string { return t.advertise }

// Close stops the Transport: it closes the listener, the StreamLayer (and
// the raft.NetworkTransport built by RaftTransport, if any), every accepted
// and pooled connection — so no Raft or RPC read stays blocked — fails
// in-flight calls with ErrClosed or errConnectionLost, cancels running
// handlers' contexts, and waits for every goroutine the Transport started
// (including running handlers); see WaitRaftConns for raft's own connection
// goroutines. Idempotent; always returns nil.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		t.wg.Wait()
		return nil
	}
	t.closed = true
	conns := make([]net.Conn, 0, len(t.conns))
	for c := range t.conns {
		conns = append(conns, c)
	}
	nt := t.raftNT
	t.mu.Unlock()

	// Connections first, so in-flight calls see the connection go (rather
	// than a reply from a handler whose context Close cancelled).
	t.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	t.cancel()
	if nt != nil {
		nt.Close()
	}
	t.stream.Close()
	t.wg.Wait()
	return nil
}

// goTracked runs f on a new goroutine counted by t.wg, unless the
// Transport is closed (then it reports false and does not run f).
func (t *Transport) goTracked(f func()) bool {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return false
	}
	t.wg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		f()
	}()
	return true
}

// track records a dialed raw connection so Close can close it. It reports
// false when the Transport is closed; the caller must then close c itself.
func (t *Transport) track(c net.Conn, kind connKind) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.conns[c] = &connInfo{kind: kind}
	return true
}

// admitInbound applies the connection limits to an accepted connection
// and tracks it (in its handshake). It returns "" when admitted, else the
// reason to refuse it (rejectClosing when the Transport is closed).
func (t *Transport) admitInbound(c net.Conn) string {
	host := remoteHost(c)
	member := t.cfg.MemberHost != nil && t.cfg.MemberHost(host)
	key := limitKey(host, member)
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return rejectClosing
	}
	if reason := t.limits.admit(key, member, now); reason != "" {
		return reason
	}
	t.conns[c] = &connInfo{kind: connHandshake, inbound: true, key: key, member: member, charged: true}
	return ""
}

// setKind updates the kind of a tracked connection (an accepted one leaves
// its handshake, which succeeded).
func (t *Transport) setKind(c net.Conn, kind connKind) {
	now := time.Now()
	t.mu.Lock()
	if ci, ok := t.conns[c]; ok {
		if ci.inbound && ci.kind == connHandshake && kind != connHandshake {
			t.limits.handshakeDone(ci.key)
			t.settleLocked(ci, now)
		}
		ci.kind = kind
	}
	t.mu.Unlock()
}

// handshakeSucceeded refunds the failure charged for an accepted
// connection when it was admitted: its TLS handshake completed (its peer
// holds a certificate the CA signed, and nothing after counts as a
// failure), or it was refused for a reason that is no failure.
func (t *Transport) handshakeSucceeded(c net.Conn) {
	now := time.Now()
	t.mu.Lock()
	if ci, ok := t.conns[c]; ok {
		t.settleLocked(ci, now)
	}
	t.mu.Unlock()
}

// settleLocked refunds ci's charged failure, once. Caller holds t.mu.
func (t *Transport) settleLocked(ci *connInfo, now time.Time) {
	if ci.inbound && ci.charged {
		ci.charged = false
		t.limits.succeeded(ci.key, ci.member, now)
	}
}

// untrack forgets c (after it was closed). Idempotent.
func (t *Transport) untrack(c net.Conn) {
	t.mu.Lock()
	if ci, ok := t.conns[c]; ok {
		delete(t.conns, c)
		if ci.inbound {
			t.limits.release(ci.key, ci.kind == connHandshake)
		}
	}
	t.mu.Unlock()
}

// closeKind closes every tracked connection of the given kind.
func (t *Transport) closeKind(kind connKind) {
	t.mu.Lock()
	var cs []net.Conn
	for c, ci := range t.conns {
		if ci.kind == kind {
			cs = append(cs, c)
		}
	}
	t.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}

func (t *Transport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// advertiseAddr is the net.Addr of the advertise address.
type advertiseAddr string

func (a advertiseAddr) Network() string { return "tcp" }
func (a advertiseAddr) String() string  { return string(a) }
