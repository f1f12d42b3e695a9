// Package lockapi is what applications call: sessions with keepalive, fenced
// locks with FIFO waiting, loss signals, leader-style singleton jobs and an
// election view, on top of an embedded raftlock node.
//
//	sess, err := lockapi.NewSession(ctx, n, lockapi.WithTTL(10*time.Second))
//	defer sess.Close(ctx)
//
//	lease, err := sess.Lock(ctx, "invoice:842") // waits in FIFO order, bounded by ctx
//	defer lease.Unlock(ctx)                     // compare-and-delete
//	err = sqlFence.Exec(lease.Context(), "invoice:842", uint64(lease.Token()), func(tx *sql.Tx) error {
//		_, err := tx.Exec(`UPDATE invoices SET state = 'final' WHERE id = 842`)
//		return err
//	}) // fence.ErrStaleToken if a newer holder already wrote
//
// # A lock is a lease
//
// A Session is one lease with the cluster, renewed by keepalives every TTL/3.
// Every lock acquired through it is valid only while the session is. The
// client counts the session as valid until sendTime + TTL − margin of its
// last successful keepalive (monotonic clock), and the leader expires it no
// earlier than arrival + TTL of that keepalive: so a client always learns
// that its lease is over (Lease.Done, Lease.Context) before the cluster can
// grant its locks to someone else.
//
// That is not enough to make writes safe: a process can pause between
// checking its lease and writing. Fencing tokens are what make writes safe —
// pass Lease.Token to the protected resource and let it reject stale tokens
// (package fence does that for in-memory state and SQL databases).
//
// # Quorum loss
//
// Without a quorum nothing is granted or renewed: calls return errors
// wrapping ErrNoQuorum within their deadline (TryLock within a few election
// timeouts, see TryTimeout), sessions go into jeopardy when keepalives fail
// and are lost when their local deadline passes (the loss's error then
// wraps ErrNoQuorum as well as ErrSessionExpired).
//
// # Calls end with their session
//
// Every blocking call of a session (Lock, TryLock, Unlock) returns as soon
// as the session ends, with the session's error, even if its context has no
// deadline. Every entry point checks its arguments (nil context, session or
// node, lock names, options) and refuses bad ones with ErrInvalidArgument
// before anything is sent.
//
// # Releases are retried
//
// An Unlock whose release cannot commit in time (no quorum) ends the lease
// at once and returns an error; the session retries the release in the
// background until it commits or the session ends, so a lock is never left
// held by a live session that gave it up. The same holds for waits withdrawn
// when their context ended, and for grants or waits of the session that it
// does not know (an acquisition whose outcome was unknown when its call gave
// up and that committed after all): the session releases them when its
// replica applies them. The session keeps nothing about calls that failed,
// so failed calls cost nothing however many there are.
package lockapi
