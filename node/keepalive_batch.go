package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/transport"
)

// Keepalive batches. Sessions renew on a grid shared by every process
// (lockapi's keepAliveDelay), so a follower's keepalives come in bursts: all
// its sessions due in the same quantum call keepAlive within a few
// microseconds. One request per keepalive cost the leader a read, a handler
// and a reply each, and the follower a send and a wake-up each — at 100
// sessions most of an idle cluster's traffic besides Raft's heartbeats, at
// 10,000 sessions thousands of requests a second. So a follower gathers the
// keepalives that arrive within keepaliveLinger of each other (at most
// maxKeepaliveBatch) into one request; the leader checks each session, runs
// one leadership round for all of them (expiryManager.keepAliveMany) and
// answers each one. The rules are those of a single keepalive, per session:
// refused if its deadline had passed when the request arrived, renewed to
// arrival + TTL once a round that started after the arrival confirmed the
// leadership.
//
// A leader of the previous release answers the unknown kind with an error
// (transport.ErrRemote): the follower then sends each keepalive of that
// batch on its own, and keeps doing so for legacyLeaderBackoff before it
// tries a batch again — a rolling upgrade costs one wasted request per
// backoff, never a keepalive.
//
//	keepalive batch request: v, kindKeepAliveBatch, n, n × session
//	keepalive batch reply:   v, kindKeepAliveBatch, n, n × (code, message)
//
// (n and sessions uvarints; 1 ≤ n ≤ maxKeepaliveBatch; a reply's n equals
// its request's; code and message as in wire.go.)
const kindKeepAliveBatch byte = 8

const (
	// maxKeepaliveBatch bounds the sessions of one batch (a request of at
	// most ~2.5 KiB); a larger burst leaves in several.
	maxKeepaliveBatch = 256
	// keepaliveLinger is how long a batch waits for more keepalives after
	// its first: long enough for a burst of goroutines woken by one timer,
	// nothing against the leader's own wait for a round (keepaliveWait).
	keepaliveLinger = time.Millisecond
	// legacyLeaderBackoff: after a leader refused a batch, keepalives go
	// one by one for this long.
	legacyLeaderBackoff = time.Minute
)

// errBatchRefused: the leader does not know keepalive batches.
var errBatchRefused = errors.New("node: the leader refused a keepalive batch")

// keepaliveForwarder is a follower's side of keepalive batches.
// Goroutine-safe; the zero value is not usable (its h must be set).
type keepaliveForwarder struct {
	h keepaliveForwarderHost

	mu      sync.Mutex
	pending *keepaliveBatch // gathering; nil when none is
	closed  bool
	single  time.Time // until then, keepalives go one by one (a legacy leader)
}

// keepaliveForwarderHost is what the forwarder needs of its node.
type keepaliveForwarderHost struct {
	ctx     context.Context // ends when the node closes
	wg      *sync.WaitGroup
	call    func(ctx context.Context, req []byte) ([]byte, error) // one RPC to the leader (callLeader)
	attempt time.Duration                                         // a batch's deadline when a caller has none
	log     *slog.Logger
}

func (n *Node) keepaliveForwarderHost() keepaliveForwarderHost {
	return keepaliveForwarderHost{ctx: n.ctx, wg: &n.wg, call: n.callLeader, attempt: n.cfg.AttemptTimeout, log: n.log}
}

// keepaliveBatch is one request: its sessions, and once done is closed
// either err (the request failed as a whole) or each session's verdict.
type keepaliveBatch struct {
	ids      []lockinfo.SessionID
	deadline time.Time // the latest of its callers' deadlines
	timer    *time.Timer
	gone     bool // sent, or failed by close (under the forwarder's mu)
	done     chan struct{}
	err      error
	verdicts []error
}

// forward sends one keepalive attempt for id to the leader, in a batch with
// the keepalives that arrive with it, and returns the leader's verdict for
// id; a failed request (no leader, transport, malformed reply) or ctx's end
// is an errForward (retried by the caller, as one keepalive's would be);
// ErrClosed once the node closes.
func (f *keepaliveForwarder) forward(ctx context.Context, id lockinfo.SessionID) error {
	if f.legacy() {
		return f.one(ctx, id)
	}
	b, i, err := f.join(ctx, id)
	if err != nil {
		return err
	}
	select {
	case <-b.done:
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", errForward, ctx.Err())
	}
	switch {
	case errors.Is(b.err, errBatchRefused):
		return f.one(ctx, id)
	case b.err != nil:
		return b.err
	}
	return b.verdicts[i]
}

// one sends a single keepalive (kindKeepAlive), for a legacy leader.
func (f *keepaliveForwarder) one(ctx context.Context, id lockinfo.SessionID) error {
	reply, err := f.h.call(ctx, encodeKeepAliveRequest(id))
	if err != nil {
		return err
	}
	verdict, err := decodeKeepAliveReply(reply)
	if err != nil {
		return fmt.Errorf("%w: %w", errForward, err)
	}
	return verdict
}

func (f *keepaliveForwarder) legacy() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Now().Before(f.single)
}

// join adds id to the gathering batch (starting one, with its linger, if
// none is) and returns it with id's position. A full batch leaves at once.
func (f *keepaliveForwarder) join(ctx context.Context, id lockinfo.SessionID) (*keepaliveBatch, int, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(f.h.attempt)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, 0, ErrClosed
	}
	b := f.pending
	if b == nil {
		b = &keepaliveBatch{done: make(chan struct{})}
		f.pending = b
		f.h.wg.Add(1) // the timer's callback, or Done where it is stopped
		b.timer = time.AfterFunc(keepaliveLinger, func() {
			defer f.h.wg.Done()
			f.leave(b)
		})
	}
	b.ids = append(b.ids, id)
	if dl.After(b.deadline) {
		b.deadline = dl
	}
	i := len(b.ids) - 1
	if len(b.ids) == maxKeepaliveBatch {
		f.pending = nil // full: no one joins it any more
		if b.timer.Stop() {
			b.gone = true
			go func() { // the wg count the stopped timer held is now this goroutine's
				defer f.h.wg.Done()
				f.send(b)
			}()
		} // else the timer's callback is about to send it
	}
	return b, i, nil
}

// leave sends b once its linger ended, unless it is gone (sent full, or
// failed by close).
func (f *keepaliveForwarder) leave(b *keepaliveBatch) {
	f.mu.Lock()
	if b.gone {
		f.mu.Unlock()
		return
	}
	b.gone = true
	if f.pending == b {
		f.pending = nil
	}
	f.mu.Unlock()
	f.send(b)
}

// send makes b's request and finishes it.
func (f *keepaliveForwarder) send(b *keepaliveBatch) {
	ctx, cancel := context.WithDeadline(f.h.ctx, b.deadline)
	defer cancel()
	reply, err := f.h.call(ctx, encodeKeepAliveBatchRequest(b.ids))
	switch {
	case errors.Is(err, transport.ErrRemote):
		f.mu.Lock()
		f.single = time.Now().Add(legacyLeaderBackoff)
		f.mu.Unlock()
		if f.h.log != nil {
			f.h.log.Info("the leader refused a keepalive batch (a previous release?): sending keepalives one by one",
				"for", legacyLeaderBackoff, "err", err)
		}
		b.err = fmt.Errorf("%w: %w", errBatchRefused, err)
	case err != nil:
		b.err = err
	default:
		if b.verdicts, err = decodeKeepAliveBatchReply(reply, len(b.ids)); err != nil {
			b.err = fmt.Errorf("%w: %w", errForward, err)
		}
	}
	close(b.done)
}

// close fails the gathering batch with ErrClosed and refuses what comes
// next. A batch in flight ends with its request (bounded by the node's ctx).
func (f *keepaliveForwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if b := f.pending; b != nil {
		f.pending = nil
		b.gone = true
		if b.timer.Stop() {
			f.h.wg.Done()
		} // else its callback finds it gone
		b.err = ErrClosed
		close(b.done)
	}
}

func encodeKeepAliveBatchRequest(ids []lockinfo.SessionID) []byte {
	b := binary.AppendUvarint([]byte{wireVersion, kindKeepAliveBatch}, uint64(len(ids)))
	for _, id := range ids {
		b = binary.AppendUvarint(b, uint64(id))
	}
	return b
}

// decodeKeepAliveBatchRequest refuses an empty batch, one larger than
// maxKeepaliveBatch, and a zero session id.
func decodeKeepAliveBatchRequest(b []byte) ([]lockinfo.SessionID, error) {
	r := reader{b: b}
	r.header(kindKeepAliveBatch)
	n := r.uvarint()
	if r.err == nil && (n == 0 || n > maxKeepaliveBatch) {
		return nil, fmt.Errorf("%w: keepalive batch of %d sessions (1 to %d)", errWire, n, maxKeepaliveBatch)
	}
	ids := make([]lockinfo.SessionID, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		id := lockinfo.SessionID(r.uvarint())
		if r.err == nil && id == 0 {
			return nil, fmt.Errorf("%w: zero session id in a keepalive batch", errWire)
		}
		ids = append(ids, id)
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return ids, nil
}

func encodeKeepAliveBatchReply(verdicts []error) []byte {
	b := binary.AppendUvarint([]byte{wireVersion, kindKeepAliveBatch}, uint64(len(verdicts)))
	for _, v := range verdicts {
		b = appendErr(b, v)
	}
	return b
}

// decodeKeepAliveBatchReply returns the verdicts of a batch of want
// sessions, or a decoding error (also for a count other than want).
func decodeKeepAliveBatchReply(b []byte, want int) ([]error, error) {
	r := reader{b: b}
	r.header(kindKeepAliveBatch)
	if n := r.uvarint(); r.err == nil && n != uint64(want) {
		return nil, fmt.Errorf("%w: %d verdicts for %d keepalives", errWire, n, want)
	}
	verdicts := make([]error, 0, want)
	for i := 0; i < want && r.err == nil; i++ {
		verdicts = append(verdicts, r.errValue())
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return verdicts, nil
}
