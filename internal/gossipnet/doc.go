// Package gossipnet holds the memberlist transports a node's gossip runs
// on. It is production code (node uses it for every gossiping node) kept
// apart from node so that node holds decisions, not sockets.
//
// # Net
//
// [Net] is memberlist's own UDP/TCP transport ([memberlist.NetTransport])
// with one change: its dials end when it shuts down, so closing a node never
// waits out a dial to an unreachable seed or member.
//
// # Stream
//
// [Stream] carries gossip over any net.Listener and dialer — node's
// GossipListener and GossipDialer test hooks (internal/nodehooks), which
// tests point at an in-memory network (internal/testing/memnet) so that gossip runs inside testing/synctest.
// Streams are connections; so is every packet: a one-shot connection, sent
// in the background and dropped on failure, like a datagram.
//
// Framing: every connection starts with one byte.
//
//	's'                                 a memberlist stream follows
//	'p' len(2, big endian) from payload  a packet: the sender's advertised
//	                                    address ("ip:port", len bytes), then
//	                                    the payload up to EOF
//
// A packet's payload is at most [MaxPacket] bytes (the rest is dropped); a
// connection that does not say what it is within the read timeout is
// closed, and so is one that starts with another byte. A received packet
// waits for memberlist to take it (or for Shutdown).
package gossipnet
