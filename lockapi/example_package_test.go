package lockapi_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

// The whole API in a few lines, on a one-node development cluster
// (Bootstrap without Peers: a cluster of this node alone at its address; a
// real deployment runs three or five replicas, see node.Config): a session,
// a lock, a write through a fence with the lease's token, the unlock.
func Example() {
	ctx := context.Background()
	cfg := node.DefaultConfig()
	cfg.ID, cfg.InMemory, cfg.Bootstrap = "dev", true, true
	cfg.BindAddr = "127.0.0.1:0"
	n, err := node.Start(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close(ctx) // a restart; n.Leave(ctx) would decommission it
	if err := n.WaitReady(ctx); err != nil {
		log.Fatal(err)
	}

	sess, err := lockapi.NewSession(ctx, n, lockapi.WithTTL(5*time.Second), lockapi.WithOwner("report-job"))
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)

	lease, err := sess.Lock(ctx, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	var store fence.Memory // the resource's side: refuses tokens older than the newest it saw
	err = store.Do("report", lease.Token(), func() error { return nil })
	fmt.Println("write:", err)
	fmt.Println("unlock:", lease.Unlock(ctx))
	// Output:
	// write: <nil>
	// unlock: <nil>
}
