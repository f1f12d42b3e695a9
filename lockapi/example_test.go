package lockapi_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

// startSingleNode starts a single-replica cluster in memory for the
// examples. A real deployment runs three or five replicas, each with a
// DataDir (see node.Config).
func startSingleNode() *node.Node {
	cfg := node.DefaultConfig()
	cfg.ID, cfg.InMemory = "replica-a", true
	cfg.Timing = nodeopts.TestTiming()
	cfg.BindAddr, cfg.Bootstrap = "127.0.0.1:0", true // a cluster of this node alone
	n, err := node.Start(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		log.Fatal(err)
	}
	return n
}

// Lock a document, write it through the SQL fence with the lease's token,
// and unlock.
func ExampleSession_Lock() {
	n := startSingleNode()
	defer n.Close(context.Background())
	ctx := context.Background()

	sess, err := lockapi.NewSession(ctx, n, lockapi.WithTTL(5*time.Second), lockapi.WithOwner("billing-worker-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)

	dir, _ := os.MkdirTemp("", "raftlock-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_txlock=immediate")
	defer db.Close()
	db.Exec(`CREATE TABLE invoices (id INTEGER PRIMARY KEY, state TEXT)`)
	db.Exec(`INSERT INTO invoices VALUES (842, 'draft')`)
	f := &fence.SQL{DB: db}
	f.CreateTable(ctx)

	lease, err := sess.Lock(ctx, "invoice:842") // FIFO wait, bounded by ctx
	if err != nil {
		log.Fatal(err)
	}
	err = f.Exec(lease.Context(), "invoice:842", uint64(lease.Token()), func(tx *sql.Tx) error {
		_, err := tx.Exec(`UPDATE invoices SET state = 'final' WHERE id = 842`)
		return err
	})
	fmt.Println("write:", err)
	fmt.Println("unlock:", lease.Unlock(ctx))

	// A later holder writes with a higher token; after that, a write with
	// the old lease's token (a holder that paused and resumed) is refused.
	next, _ := sess.Lock(ctx, "invoice:842")
	f.Exec(ctx, "invoice:842", uint64(next.Token()), func(tx *sql.Tx) error { return nil })
	next.Unlock(ctx)
	err = f.Exec(ctx, "invoice:842", uint64(lease.Token()), func(tx *sql.Tx) error { return nil })
	fmt.Println("stale write refused:", errors.Is(err, lockapi.ErrStaleToken))
	// Output:
	// write: <nil>
	// unlock: <nil>
	// stale write refused: true
}

// TryLock returns at once, naming the holder.
func ExampleSession_TryLock() {
	n := startSingleNode()
	defer n.Close(context.Background())
	ctx := context.Background()
	a, _ := lockapi.NewSession(ctx, n, lockapi.WithTTL(5*time.Second), lockapi.WithOwner("worker-a"))
	defer a.Close(ctx)
	b, _ := lockapi.NewSession(ctx, n, lockapi.WithTTL(5*time.Second), lockapi.WithOwner("worker-b"))
	defer b.Close(ctx)

	held, _ := a.TryLock(ctx, "shard:3")
	_, err := b.TryLock(ctx, "shard:3")
	var locked *lockapi.LockedError
	if errors.As(err, &locked) {
		fmt.Println("held by", locked.Holder.Description)
	}
	held.Unlock(ctx)
	// Output:
	// held by worker-a
}

// Run a leader-style job on at most one replica; its context ends if the
// lease is lost, and it is run again wherever the lock is granted next.
func ExampleRunSingleton() {
	n := startSingleNode()
	defer n.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sess, _ := lockapi.NewSession(ctx, n, lockapi.WithTTL(5*time.Second))
	defer sess.Close(context.Background())

	err := lockapi.RunSingleton(ctx, sess, "tenant:7/nightly-report", func(ctx context.Context, l *lockapi.Lease) error {
		fmt.Println("running with a fencing token:", l.Token() > 0)
		return nil // done: RunSingleton releases the lock and returns
	})
	fmt.Println("finished:", err)
	// Output:
	// running with a fencing token: true
	// finished: <nil>
}
