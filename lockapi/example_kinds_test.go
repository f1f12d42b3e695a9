package lockapi_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

// startVersion3Node is startSingleNode once the cluster version allows the
// primitives (version 3: a moment after the first leader took over).
func startVersion3Node() *node.Node {
	n := startSingleNode()
	for n.Status().ClusterVersion < fsm.MaxClusterVersion {
		time.Sleep(5 * time.Millisecond)
	}
	return n
}

// At most 2 permits of the semaphore are held at once: two goroutines of
// one session take one each; another worker waits (FIFO) or, with
// TryAcquire, is told how many permits are free. The first session asking
// for a third permit would wait for its own: it is refused at once.
func ExampleSession_Acquire() {
	n := startVersion3Node()
	defer n.Close(context.Background())
	ctx := context.Background()
	sess, err := lockapi.NewSession(ctx, n, lockapi.WithTTL(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)
	other, err := lockapi.NewSession(ctx, n, lockapi.WithTTL(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close(ctx)

	gpus := lockapi.Semaphore{Name: "pool:gpu", Limit: 2}
	a, _ := sess.Acquire(ctx, gpus, 1)
	b, _ := sess.Acquire(ctx, gpus, 1)
	_, err = other.TryAcquire(ctx, gpus, 1)
	var locked *lockapi.LockedError
	fmt.Println("third refused:", errors.As(err, &locked), "free:", locked.Free)
	fmt.Println("own tokens:", a.Token() < b.Token())
	_, err = sess.Acquire(ctx, gpus, 1)
	fmt.Println("a third of its own:", errors.Is(err, lockapi.ErrAlreadyHeld))

	_, err = other.Acquire(ctx, lockapi.Semaphore{Name: "pool:gpu", Limit: 3}, 1)
	fmt.Println("another limit:", errors.Is(err, lockapi.ErrConflict))
	a.Unlock(ctx)
	b.Unlock(ctx)
	// Output:
	// third refused: true free: 0
	// own tokens: true
	// a third of its own: true
	// another limit: true
}

// Readers share a document; a writer waits for them, and readers that come
// after it wait behind it. A reader's token validates a read against the
// write fence; only writers record theirs. A session does not upgrade its
// read lock: its Lock would wait for its own readers.
func ExampleSession_RLock() {
	n := startVersion3Node()
	defer n.Close(context.Background())
	ctx := context.Background()
	sess, _ := lockapi.NewSession(ctx, n, lockapi.WithTTL(5*time.Second))
	defer sess.Close(ctx)
	writer, _ := lockapi.NewSession(ctx, n, lockapi.WithTTL(5*time.Second))
	defer writer.Close(ctx)
	var writes fence.Memory

	w, _ := sess.Lock(ctx, "doc:7")
	writes.Admit("doc:7", uint64(w.Token())) // the write
	w.Unlock(ctx)

	r1, _ := sess.RLock(ctx, "doc:7")
	r2, _ := sess.RLock(ctx, "doc:7") // readers share
	fmt.Println("readers:", r1.Shared() && r2.Shared())
	fmt.Println("read sees no later write:", writes.Highest("doc:7") < uint64(r1.Token()))
	_, err := writer.TryLock(ctx, "doc:7")
	fmt.Println("writer refused while reading:", errors.Is(err, lockapi.ErrLocked))
	_, err = sess.Lock(ctx, "doc:7")
	fmt.Println("no upgrade:", errors.Is(err, lockapi.ErrAlreadyHeld))
	r1.Unlock(ctx)
	r2.Unlock(ctx)
	w2, _ := writer.TryLock(ctx, "doc:7")
	fmt.Println("writer token above the readers':", w2.Token() > r2.Token())
	w2.Unlock(ctx)
	// Output:
	// readers: true
	// read sees no later write: true
	// writer refused while reading: true
	// no upgrade: true
	// writer token above the readers': true
}

// A candidate campaigns with its address, proclaims a new one, and resigns;
// every replica reads the leader with its value.
func ExampleElection_Campaign() {
	n := startVersion3Node()
	defer n.Close(context.Background())
	ctx := context.Background()
	sess, _ := lockapi.NewSession(ctx, n, lockapi.WithTTL(5*time.Second))
	defer sess.Close(ctx)

	e, _ := lockapi.NewElection(n, "service:billing/primary")
	if _, err := e.Campaign(ctx, sess, "10.0.0.7:8080"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", e.Leader().Value)
	e.Proclaim(ctx, "10.0.0.7:9090")
	fmt.Println("proclaimed:", e.Leader().Value)
	e.Resign(ctx)
	fmt.Println("after resigning, somebody leads:", e.Leader().Valid())
	// Output:
	// leader: 10.0.0.7:8080
	// proclaimed: 10.0.0.7:9090
	// after resigning, somebody leads: false
}

// RunSingleton with client-go-style callbacks.
func ExampleWithCallbacks() {
	n := startVersion3Node()
	defer n.Close(context.Background())
	ctx := context.Background()
	sess, _ := lockapi.NewSession(ctx, n, lockapi.WithTTL(5*time.Second))
	defer sess.Close(ctx)

	err := lockapi.RunSingleton(ctx, sess, "nightly", func(ctx context.Context, l *lockapi.Lease) error {
		fmt.Println("job runs")
		return nil
	}, lockapi.WithCallbacks(lockapi.SingletonCallbacks{
		OnStartedLeading: func(l *lockapi.Lease) { fmt.Println("started leading") },
		OnStoppedLeading: func(l *lockapi.Lease, err error) { fmt.Println("stopped leading; the job has returned:", err) },
	}))
	fmt.Println("done:", err)
	// Output:
	// started leading
	// job runs
	// stopped leading; the job has returned: <nil>
	// done: <nil>
}
