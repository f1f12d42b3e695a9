// Package transport gives each raftlock node one TCP port that carries both
// its Raft traffic and the request/response RPC followers use to forward
// work to the leader, optionally under mutual TLS. It knows nothing about
// locks: RPC payloads are opaque bytes whose versioning is the caller's job.
//
// # One port, two protocols
//
// The dialer opens every connection (inside TLS when TLS is on) with a
// two-byte preface: a protocol type byte (Raft or RPC) and that protocol's
// wire version. The listener reads it within Config.HandshakeTimeout,
// answers, and hands the connection to the raft.StreamLayer (Accept) or to
// the RPC server. A peer that sends an unknown type byte, garbage, an
// unsupported version, plaintext to a TLS node, a certificate the node does
// not trust, or nothing at all before the deadline is disconnected, counted
// (raftlock_transport_handshakes_rejected_total{reason}) and logged at
// debug level. The answer lets the dialer fail fast with ErrHandshake or
// ErrProtocol (e.g. a TLS 1.3 server refusing the client's certificate).
//
// # Raft
//
// StreamLayer is a raft.StreamLayer; RaftTransport builds the
// raft.NetworkTransport over it with Config.RaftMaxPool and RaftTimeout.
// Closing the Transport (or the StreamLayer) closes every Raft connection,
// so raft never stays blocked on a read during shutdown. See RaftTransport
// for the shutdown order.
//
// # RPC
//
// Call sends an opaque request to a peer's Handler and waits for the
// response. Calls to one peer are multiplexed over a small pool of
// connections (Config.RPCConnsPerPeer): each request is a frame with a call
// id, the peer answers in any order, a writer goroutine per connection
// batches frames into few writes, and no goroutine is started per call.
// Every call is bounded by its context: the caller returns as soon as ctx
// ends, the peer is told to cancel the handler, and the remaining deadline
// travels with the request so the handler's context expires with the
// caller's. Pings every Config.KeepaliveInterval detect dead peers (three
// silent intervals close the connection); a broken or stale connection is
// re-dialed on the next call, so calls work again once a restarted peer is
// back. The wire format is documented in frame.go and handshake.go.
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
// internal/memnet, an in-memory network whose blocking is durable for
// testing/synctest: whole raft clusters run over this transport on fake
// time, with partitions and delays.
package transport
