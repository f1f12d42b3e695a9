package node_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// Issue 14 #5: an entry of a version this binary does not know is never
// skipped. Every replica halts before it — applying nothing after it,
// taking no snapshot — and stops serving with a clear error.
func TestUnknownEntryVersionHaltsTheReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, li := readyCluster(t, clustertest.Options{})
		ctx := context.Background()
		s := openSession(t, ctx, c.Nodes[li], time.Minute)
		for _, n := range c.Nodes {
			if err := n.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// Let the commit nudges of those Syncs settle (their Noops commit
		// after the Syncs return) and every replica learn the last commit.
		time.Sleep(20 * c.Nodes[li].Timing().CommitTimeout)
		before := replica.Of(c.Nodes[li]).AppliedIndex()
		if err := node.ApplyRaw(c.Nodes[li], []byte{5, 0, 1, 7}); err != nil { // entry version 5, one Noop
			t.Fatal(err)
		}
		c.Eventually(5*time.Second, func() (bool, string) {
			for _, n := range c.Nodes {
				if n.Status().Halted == "" {
					return false, n.ID() + " not halted"
				}
			}
			return true, ""
		})
		for _, n := range c.Nodes {
			st := n.Status()
			if st.Ready || !strings.Contains(st.Halted, "entry version 5") || st.AppliedIndex != before {
				t.Fatalf("%s: ready %v, halted %q, applied %d (before %d)", n.ID(), st.Ready, st.Halted, st.AppliedIndex, before)
			}
			tctx, cancel := context.WithTimeout(ctx, time.Second)
			for name, err := range map[string]error{
				"propose": func() error {
					_, _, err := replica.Of(n).Propose(tctx, fsm.Acquire{Session: s, Lock: "l", Owner: newOwner()})
					return err
				}(),
				"sync":      n.Sync(tctx),
				"keepalive": replica.Of(n).KeepAlive(tctx, s),
				"ready":     n.WaitReady(tctx),
			} {
				if !errors.Is(err, node.ErrHalted) {
					t.Errorf("%s: %s: %v, want ErrHalted", n.ID(), name, err)
				}
			}
			cancel()
			if err := node.SnapshotNow(n); err == nil {
				t.Errorf("%s took a snapshot while halted", n.ID())
			}
		}
	})
}
