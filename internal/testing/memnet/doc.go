// Package memnet is an in-memory network for deterministic tests.
//
// A Network holds named hosts. A host listens on string addresses and dials
// other hosts' addresses; the resulting connections are buffered, in-memory
// byte streams that implement net.Conn, including read and write deadlines.
//
// memnet is built only from mutexes, sync.Cond and timers, so a goroutine
// blocked on a memnet Accept, Dial, Read or Write is "durably blocked" in the
// sense of testing/synctest: whole clusters can run inside a synctest bubble
// on fake time. Create the Network inside the bubble that uses it.
//
// Faults act on ordered pairs of hosts (from → to):
//
//   - Partition, Block, Isolate: while from → to is cut, a new dial between
//     the two hosts (either way) hangs until its context ends, like a
//     black-holed SYN, and bytes written from → to on existing connections
//     are silently discarded, so peers time out as in a real partition;
//     bytes still in flight (delayed, not yet due) are discarded too.
//     When the cut is healed, every connection that lost bytes is reset (so a
//     stream is never silently corrupted) and new dials succeed.
//   - SetDelay adds latency to bytes sent from → to (and to dial set-up).
//   - DropConns resets existing connections at once, like a TCP RST.
//
// Faults act on single connections too (flows.go): Flows lists the live
// connections (selected by hosts and by the dialer's first bytes, e.g. a
// protocol type byte), DelayFlow delays one direction of one connection,
// CutFlow black-holes it, ClearFlows removes both, ResetFlow resets it.
//
// A Tap (tap.go) records what dialers write on the connections it selects,
// and Replay sends such a conversation again, late, on a connection of its
// own: a network that delivers a client's requests twice.
//
// All methods of Network, Host, listeners and connections are safe for
// concurrent use.
package memnet
