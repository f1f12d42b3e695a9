package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/transport"
)

// fakeLeader answers a keepaliveForwarder's requests: batches (unless
// legacy, then like a leader of the previous release) and single
// keepalives, refusing the sessions in expired.
type fakeLeader struct {
	mu      sync.Mutex
	legacy  bool
	fail    error // every request fails so
	block   chan struct{}
	expired map[lockinfo.SessionID]bool
	batches [][]lockinfo.SessionID
	singles []lockinfo.SessionID
	refused int // requests of a kind it does not know
}

func (l *fakeLeader) call(ctx context.Context, req []byte) ([]byte, error) {
	if l.block != nil {
		select {
		case <-l.block:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", errForward, ctx.Err())
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return nil, l.fail
	}
	verdict := func(id lockinfo.SessionID) error {
		if l.expired[id] {
			return replica.ErrSessionExpired
		}
		return nil
	}
	kind, _ := requestKind(req)
	switch {
	case kind == kindKeepAliveBatch && !l.legacy:
		ids, err := decodeKeepAliveBatchRequest(req)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", transport.ErrRemote, err)
		}
		l.batches = append(l.batches, ids)
		vs := make([]error, len(ids))
		for i, id := range ids {
			vs[i] = verdict(id)
		}
		return encodeKeepAliveBatchReply(vs), nil
	case kind == kindKeepAlive:
		id, err := decodeKeepAliveRequest(req)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", transport.ErrRemote, err)
		}
		l.singles = append(l.singles, id)
		return encodeKeepAliveReply(verdict(id)), nil
	}
	l.refused++
	return nil, fmt.Errorf("%w: node: malformed message: unknown request kind %d", transport.ErrRemote, kind)
}

func (l *fakeLeader) counts() (batches, singles int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.batches), len(l.singles)
}

// burst sends n keepalives (sessions 1..n) at once through f and returns
// their errors.
func burst(ctx context.Context, f *keepaliveForwarder, n int) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f.forward(ctx, lockinfo.SessionID(i+1)) })
	}
	wg.Wait()
	return errs
}

func TestKeepaliveForwarder(t *testing.T) {
	setup := func(l *fakeLeader) (*keepaliveForwarder, *sync.WaitGroup, context.CancelFunc) {
		var wg sync.WaitGroup
		ctx, cancel := context.WithCancel(context.Background())
		return &keepaliveForwarder{h: keepaliveForwarderHost{ctx: ctx, wg: &wg, call: l.call, attempt: 2 * time.Second}}, &wg, cancel
	}
	t.Run("a burst is one request, with each session's verdict", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := &fakeLeader{expired: map[lockinfo.SessionID]bool{3: true}}
			f, wg, cancel := setup(l)
			defer cancel()
			errs := burst(t.Context(), f, 10)
			for i, err := range errs {
				if want := i+1 == 3; errors.Is(err, replica.ErrSessionExpired) != want || (!want && err != nil) {
					t.Errorf("session %d: %v", i+1, err)
				}
			}
			if b, s := l.counts(); b != 1 || s != 0 || len(l.batches[0]) != 10 {
				t.Fatalf("%d batches, %d singles (%v), want one batch of 10", b, s, l.batches)
			}
			f.close()
			wg.Wait()
		})
	})
	t.Run("a burst larger than a batch leaves in several", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := &fakeLeader{}
			f, wg, cancel := setup(l)
			defer cancel()
			for i, err := range burst(t.Context(), f, maxKeepaliveBatch+44) {
				if err != nil {
					t.Fatalf("session %d: %v", i+1, err)
				}
			}
			if b, _ := l.counts(); b != 2 || len(l.batches[0])+len(l.batches[1]) != maxKeepaliveBatch+44 {
				t.Fatalf("%d batches, want 2 holding every session", b)
			}
			for _, ids := range l.batches {
				if len(ids) > maxKeepaliveBatch {
					t.Fatalf("a batch of %d", len(ids))
				}
			}
			f.close()
			wg.Wait()
		})
	})
	t.Run("a failed request fails each keepalive, retryably", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := &fakeLeader{fail: errNoLeader}
			f, wg, cancel := setup(l)
			defer cancel()
			for i, err := range burst(t.Context(), f, 5) {
				if !errors.Is(err, errNoLeader) || !retryable(err) {
					t.Fatalf("session %d: %v, want the request's retryable error", i+1, err)
				}
			}
			f.close()
			wg.Wait()
		})
	})
	t.Run("a leader of the previous release gets single keepalives", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := &fakeLeader{legacy: true, expired: map[lockinfo.SessionID]bool{2: true}}
			f, wg, cancel := setup(l)
			defer cancel()
			errs := burst(t.Context(), f, 4)
			for i, err := range errs {
				if want := i+1 == 2; errors.Is(err, replica.ErrSessionExpired) != want || (!want && err != nil) {
					t.Errorf("session %d: %v", i+1, err)
				}
			}
			if _, s := l.counts(); s != 4 {
				t.Fatalf("%d singles after the refused batch, want 4", s)
			}
			burst(t.Context(), f, 4) // within the backoff: no batch tried
			if b, s := l.counts(); b != 0 || s != 8 || l.refused != 1 {
				t.Fatalf("%d batches, %d singles, %d refused requests within the backoff, want 0, 8 and 1", b, s, l.refused)
			}
			time.Sleep(legacyLeaderBackoff)
			l.mu.Lock()
			l.legacy = false // upgraded
			l.mu.Unlock()
			burst(t.Context(), f, 4)
			if b, s := l.counts(); b != 1 || s != 8 {
				t.Fatalf("%d batches, %d singles after the backoff, want 1 and 8", b, s)
			}
			f.close()
			wg.Wait()
		})
	})
	t.Run("a caller whose context ends returns, retryably", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := &fakeLeader{block: make(chan struct{})}
			f, wg, cancel := setup(l)
			defer cancel()
			ctx, stop := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer stop()
			err := f.forward(ctx, 1)
			if !errors.Is(err, context.DeadlineExceeded) || !retryable(err) {
				t.Fatalf("forward: %v, want a retryable error wrapping the deadline", err)
			}
			close(l.block)
			f.close()
			wg.Wait()
		})
	})
	t.Run("close fails the gathering batch and refuses the next", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := &fakeLeader{}
			f, wg, cancel := setup(l)
			defer cancel()
			done := make(chan error)
			go func() { done <- f.forward(t.Context(), 1) }()
			synctest.Wait() // it waits in the batch's linger
			f.close()
			if err := <-done; !errors.Is(err, ErrClosed) {
				t.Fatalf("gathering: %v, want ErrClosed", err)
			}
			if err := f.forward(t.Context(), 2); !errors.Is(err, ErrClosed) {
				t.Fatalf("after close: %v, want ErrClosed", err)
			}
			wg.Wait()
			if b, s := l.counts(); b+s != 0 {
				t.Fatalf("%d requests sent after close", b+s)
			}
		})
	})
}

func TestKeepaliveBatchWire(t *testing.T) {
	ids := []lockinfo.SessionID{1, 300, 1 << 40}
	back, err := decodeKeepAliveBatchRequest(encodeKeepAliveBatchRequest(ids))
	if err != nil || fmt.Sprint(back) != fmt.Sprint(ids) {
		t.Fatalf("request round trip: %v %v", back, err)
	}
	vs, err := decodeKeepAliveBatchReply(encodeKeepAliveBatchReply([]error{nil, replica.ErrSessionExpired, ErrNoQuorum}), 3)
	if err != nil || vs[0] != nil || !errors.Is(vs[1], replica.ErrSessionExpired) || !errors.Is(vs[2], ErrNoQuorum) {
		t.Fatalf("reply round trip: %v %v", vs, err)
	}
	tooMany := make([]lockinfo.SessionID, maxKeepaliveBatch+1)
	for i := range tooMany {
		tooMany[i] = 1
	}
	for name, b := range map[string][]byte{
		"empty":          encodeKeepAliveBatchRequest(nil),
		"too many":       encodeKeepAliveBatchRequest(tooMany),
		"zero session":   encodeKeepAliveBatchRequest([]lockinfo.SessionID{4, 0}),
		"truncated":      encodeKeepAliveBatchRequest(ids)[:5],
		"trailing bytes": append(encodeKeepAliveBatchRequest(ids), 1),
		"count too high": {wireVersion, kindKeepAliveBatch, 1 << 6},
	} {
		if _, err := decodeKeepAliveBatchRequest(b); !errors.Is(err, errWire) {
			t.Errorf("%s: %v, want errWire", name, err)
		}
	}
	if _, err := decodeKeepAliveBatchReply(encodeKeepAliveBatchReply([]error{nil}), 2); !errors.Is(err, errWire) {
		t.Errorf("a reply of 1 verdict for 2: %v", err)
	}
}
