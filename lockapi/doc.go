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
// wrapping ErrNoQuorum, sessions go into jeopardy when keepalives fail and
// are lost when their local deadline passes.
package lockapi
