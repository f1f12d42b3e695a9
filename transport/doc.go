// Package transport gives each raftlock node one TCP port that carries both
// its Raft traffic and the request/response RPC followers use to forward
// work to the leader, optionally under mutual TLS. It knows nothing about
// locks: RPC payloads are opaque bytes whose versioning is the caller's job.
//
// # One port, two protocols
//
// The dialer opens every connection (inside TLS when TLS is on) with a
// two-byte preface: a protocol type byte (Raft or RPC) and a wire version
// (handshake.go). The listener reads it within Inbound.HandshakeTimeout
// and answers; for version 2 the two sides then exchange a hello. Only then is
// the connection handed to the raft.StreamLayer (Accept) or to the RPC
// server. A peer that sends an unknown type byte, garbage, an unsupported
// or refused version, a malformed hello, plaintext to a TLS node, a
// certificate the node does not trust, or nothing at all before the
// deadline is disconnected, counted
// (raftlock_transport_handshakes_rejected_total{reason}) and logged at
// debug level. The answers let the dialer fail fast with errHandshake,
// errProtocol or errRefused instead of a later, ambiguous read error.
//
// # Versions and the identity hello
//
// Version 1 is the previous release's wire format: no hello, raw Raft
// stream. Version 2 adds the hello (hello.go): after the preface the dialer
// sends its Identity (node id, data-dir incarnation, cluster id), the
// listener vets it with Config.CheckPeer and answers with its own Identity
// or a refusal, and the dialer vets that and answers accept or refusal.
// A refusal carries its reason (CheckPeer's error text, at most 512 bytes)
// to the refused side before the connection closes, so both sides know why:
// the dialer's call or Raft dial fails with an error wrapping errRefused
// (or, when the dialer refused, errHandshake and CheckPeer's error), and
// both sides record it in Transport.Refusals, count it and log it at Warn
// once per peer and reason. The checks apply to Raft connections too: the
// hello runs inside StreamLayer.Dial and before Accept hands a connection
// over. Transport.Probe runs just the set-up and reports the peer's
// Identity and verified certificate chain.
//
// A transport with Config.Identity dials version 2; without, version 1. A
// listener always accepts version 2 and accepts version 1 when it has no
// Identity or when Config.AcceptLegacy returns true (a rolling upgrade). A
// version-2 dialer refused with the version error re-dials with version 1
// when AcceptLegacy returns true and keeps using version 1 for that address
// for a minute.
//
// Without TLS the hello is not authenticated: anyone can claim any
// Identity. It protects against mistakes (two clusters that meet, a
// wiped node that comes back under its old name), not against an attacker;
// see "Security model".
//
// # Raft
//
// streamLayer is a raft.StreamLayer; RaftTransport builds the
// raft.NetworkTransport over it with Config.RaftMaxPool and RaftTimeout.
// Closing the Transport (or the StreamLayer) closes every Raft connection,
// so raft never stays blocked on a read during shutdown. See RaftTransport
// for the shutdown order.
//
// An inbound Raft connection on which nothing arrives for
// Config.RaftIdleTimeout while raft waits to read, or on which a response
// cannot be written for that long, is closed. raft keeps idle outbound
// connections in its pool and would only notice a cut when it next uses
// one (that RPC fails, a vote can be lost), so in version 2 the
// dialer→listener direction is cut into chunks (raftstream.go) and the
// dialer sends an empty chunk when it wrote nothing for a third of the
// listener's RaftIdleTimeout (announced in its hello): a healthy peer's
// connection is never cut. A version-1 peer's idle connections are.
//
// Before raft's decoder sees the bytes of an inbound request, a guard
// (raftguard.go) walks its msgpack structure and closes the connection when
// the request nests deeper than 8, declares an array of more than 1024
// elements or a map of more than 64 pairs, or holds more than 32768 values
// — bounds every hashicorp/raft v1.7.3 message keeps, and without which a
// request of empty entries makes raft allocate a hundred times what it
// sent. Payload bytes (an entry's Data, snapshot data) are not bounded:
// they cost about what arrived, only while bytes keep arriving.
//
// The same guard holds the vote gate (Config.RaftVoteGate): at the type
// byte of an inbound RequestVote or RequestPreVote it asks the gate, and
// on a no closes the connection with the request unread (raft on this node
// sees the stream end; the candidate's RPC fails, which its raft counts as
// a vote not granted). Nothing else is held back, and nothing stands
// between raft's NetworkTransport and raft: the gate costs replication no
// goroutine hand-off.
//
// # RPC
//
// Call sends an opaque request to a peer's HandlerFunc and waits for the
// response. Calls to one peer are multiplexed over a small pool of
// connections (Config.RPCConnsPerPeer): each request is a frame with a call
// id, the peer answers in any order, a writer goroutine per connection
// batches frames into few writes (a request or reply is written by the
// caller's or handler's own goroutine when nothing waits for the writer),
// and no goroutine is started per call on the caller's side.
// Every call is bounded by its context: the caller returns as soon as ctx
// ends, the peer is told to cancel the handler, and the remaining deadline
// travels with the request so the handler's context expires with the
// caller's. The client pings every Config.KeepaliveInterval (or the
// server's interval, announced in its hello, if shorter); either side
// closes a connection on which nothing arrived for three keepalive ticks.
// Liveness counts ticks of Go's monotonic timers and never compares clock
// readings, so a wall-clock step neither kills healthy connections nor
// hides dead ones. A broken or stale connection is re-dialed on the next
// call; a connection without calls for Config.RPCIdleTimeout is closed, and
// an address is forgotten with its last connection. The wire format is
// documented in frame.go, handshake.go and hello.go.
//
// # Limits
//
// Connections (Config.Inbound, see InboundLimits): at most MaxConns
// inbound connections (default 512), MaxConnsPerHost from one source IP
// (64), MaxHandshakes in their handshake for strangers (128) and
// MaxHandshakesPerHost from one source IP (8); members' source addresses
// (Config.MemberHost) may use MemberReserve more (64, a quarter per
// address), which strangers never get, so that strangers cannot starve
// elections and re-dials of handshakes. Failed handshakes are charged to
// their source address (4 a second, ten seconds' worth saved up) and to
// the strangers together (64 a second): over budget, connections are
// refused at accept, before any TLS work. A connection beyond a limit is
// closed as soon as it is accepted, before anything is read or allocated
// for it, counted (reason conn_limit, host_limit, handshake_limit,
// host_handshake_limit, failure_limit) and logged at Warn at most every
// 10 s. Outbound connections are not limited.
//
// Sizes: an RPC request or response payload is at most
// Config.MaxMessageSize (default 16 MiB; the wire allows up to 1 GiB), an
// error message 64 KiB, a hello 1 KiB, a Raft chunk 1 MiB. A payload buffer
// grows as bytes arrive (it never allocates the declared length up front).
// The running handlers of one connection hold at most 1024 requests. The
// RPC frame bytes an inbound connection holds — the request being read,
// counted as its buffer grows, and those its handlers hold — are at most
// Inbound.MaxFrameBytesPerConn (4 × MaxMessageSize), and over all inbound
// connections Inbound.MaxFrameBytes (8 × MaxMessageSize); beyond either
// the connection's reader waits.
//
// Time: the first TLS record (or, without TLS, the preface) within
// Inbound.FirstByteTimeout (1 s); the TLS handshake, preface and hello
// within Inbound.HandshakeTimeout (default 5 s); RPC silence three keepalive intervals (15 s); inbound
// Raft idleness RaftIdleTimeout (1 min); unused outbound RPC connections
// RPCIdleTimeout (2 min); each Raft RPC RaftTimeout (10 s, scaled up by
// raft for snapshots).
//
// # Security model
//
// Mutual TLS authenticates every Raft and RPC connection in both
// directions; the gossip key (node package) authenticates and encrypts
// membership traffic. Together they keep strangers out of both ports.
// Without TLS anyone who reaches the port can speak Raft to the node, so
// Validate refuses a plaintext bind on an address other than loopback
// unless Config.AllowPlaintext says the network itself is trusted. The
// identity hello runs inside TLS and, under TLS, comes from a peer whose
// certificate the CA signed; Probe returns that certificate so the caller
// can check that it names the claimed node. The limits above bound what a
// peer that passed TLS (or any peer, without TLS) can make the node hold,
// and what strangers without a certificate can take from members: a
// stranger on a member's source address is indistinguishable from it and
// shares its allowance.
//
// # Mutual TLS
//
// With Config.TLS set, every connection — Raft and RPC, inbound and
// outbound — is TLS (1.2 or later); the server side requires and verifies
// client certificates, the client side verifies the server; there is no
// plaintext fallback. Build the config with NewMutualTLSConfig from this
// node's certificate (with both the serverAuth and clientAuth extended key
// usages, or none) and the CA pool that signs all nodes' certificates.
// When dialing, the peer's certificate is checked against the ServerName
// of the config or, if that is empty, against the host of the dialed
// address — a DNS SAN, or an IP SAN when peers are addressed by IP. A
// shared ServerName such as "raftlock", present as a DNS SAN in every
// node's certificate, avoids per-host certificates.
//
// # Tests
//
// Config.Listener and Config.Dialer let a Transport run on
// internal/testing/memnet, an in-memory network whose blocking is durable for
// testing/synctest: whole raft clusters run over this transport on fake
// time, with partitions and delays.
package transport
