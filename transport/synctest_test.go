package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/testing/memnet"
)

// These tests run whole transports (and raft) on the in-memory network
// inside synctest bubbles: time is fake and advances only when every
// goroutine is durably blocked, so timeouts of seconds take no real time
// and the durations asserted below are exact.

// memTransport starts a transport for host name on n, listening on
// "name:7000".
func memTransport(t testing.TB, n *memnet.Network, name string, h HandlerFunc, edit func(*Config)) *Transport {
	t.Helper()
	ln, err := n.Host(name).Listen(name + ":7000")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(nil)
	cfg.Listener = ln
	cfg.Dialer = n.Host(name).Dial
	if edit != nil {
		edit(&cfg)
	}
	tr, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestSynctestRaftClusterOverMemnet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		defer n.Close()
		var trs []*Transport
		for _, h := range []string{"a", "b", "c"} {
			trs = append(trs, memTransport(t, n, h, echo, nil))
		}
		entries := testEntries(50)
		nodes := startRaftCluster(t, trs, raftTiming{}, len(entries)) // raft's default (1s) timeouts
		start := time.Now()
		applyViaLeader(t, nodes, entries, time.Minute)
		waitApplied(t, nodes, entries, time.Minute)
		t.Logf("election and 50 commits took %v of fake time", time.Since(start))

		// Partition the leader away: the majority elects a new leader and
		// keeps committing; the old leader cannot commit.
		hosts := []string{"a", "b", "c"}
		leader := -1
		for i, nd := range nodes {
			if nd.r.State() == raft.Leader {
				leader = i
			}
		}
		if leader < 0 {
			t.Fatal("no leader")
		}
		var rest []*clusterNode
		var restHosts []string
		for i, nd := range nodes {
			if i != leader {
				rest = append(rest, nd)
				restHosts = append(restHosts, hosts[i])
			}
		}
		n.Partition([]string{hosts[leader]}, restHosts)
		old := nodes[leader].r
		if err := old.Apply([]byte("lost"), 5*time.Second).Error(); err == nil {
			t.Fatal("partitioned leader committed an entry")
		}
		all := testEntries(60)
		expect(nodes, len(all))
		applyViaLeader(t, rest, all[50:], time.Minute)
		waitApplied(t, rest, all, time.Minute)
		if old.State() == raft.Leader {
			t.Fatal("partitioned node still believes it leads")
		}

		// Heal: connections that lost bytes are reset, raft redials, and the
		// old leader catches up (its uncommitted "lost" entry is replaced).
		n.Heal()
		waitApplied(t, nodes, all, time.Minute)
		stopRaftCluster(t, nodes)
	})
}

func TestSynctestCallTimesOutInPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		defer n.Close()
		srv := memTransport(t, n, "srv", echo, nil)
		defer srv.Close()
		cli := memTransport(t, n, "cli", nil, nil)
		defer cli.Close()
		ctx := context.Background()
		if _, err := cli.Call(ctx, srv.Addr(), []byte("warm")); err != nil {
			t.Fatal(err)
		}

		n.Partition([]string{"cli"}, []string{"srv"})
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Call(cctx, srv.Addr(), []byte("x"))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call across partition: %v", err)
		}
		if got := time.Since(start); got != 2*time.Second {
			t.Fatalf("call gave up after %v, want exactly its 2s deadline", got)
		}

		// A call without a deadline is still bounded: keepalives stop and
		// the connection is declared dead after 3 intervals.
		start = time.Now()
		_, err = cli.Call(ctx, srv.Addr(), []byte("y"))
		if !errors.Is(err, errConnectionLost) {
			t.Fatalf("call without deadline across partition: %v", err)
		}
		if got, max := time.Since(start), deadAfter*defaultKeepaliveInterval+defaultKeepaliveInterval; got > max {
			t.Fatalf("dead connection detected after %v, want at most %v", got, max)
		}

		// New dials hang while partitioned, then work after healing.
		cctx, cancel = context.WithTimeout(ctx, time.Second)
		if _, err := cli.Call(cctx, srv.Addr(), []byte("z")); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("dial across partition: %v", err)
		}
		cancel()
		n.Heal()
		if resp, err := cli.Call(ctx, srv.Addr(), []byte("back")); err != nil || string(resp) != "echo:back" {
			t.Fatalf("after heal: %q, %v", resp, err)
		}
	})
}

// A peer that sends nothing is dropped after FirstByteTimeout; one that
// sends its preface and then stalls in the hello, after HandshakeTimeout.
func TestSynctestHandshakeTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		send []byte
		want time.Duration
	}{
		{"silent", nil, 500 * time.Millisecond},
		{"stalled hello", []byte{protoRPC, versionHello}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := memnet.New()
				defer n.Close()
				var rej <-chan string
				srv := memTransport(t, n, "srv", echo, func(c *Config) {
					c.Inbound.FirstByteTimeout = 500 * time.Millisecond
					c.Inbound.HandshakeTimeout = 3 * time.Second
					rej = watchRejects(c)
				})
				defer srv.Close()
				c, err := n.Host("silent").Dial(context.Background(), srv.Addr())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				start := time.Now()
				c.Write(tc.send)
				io.Copy(io.Discard, c)
				if got := time.Since(start); got != tc.want {
					t.Fatalf("peer dropped after %v, want %v", got, tc.want)
				}
				if r := <-rej; r != rejectTimeout {
					t.Fatalf("reason %q", r)
				}
			})
		})
	}
}

func TestSynctestDeadlinePropagation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		defer n.Close()
		n.SetDelay("cli", "srv", 10*time.Millisecond)
		n.SetDelay("srv", "cli", 10*time.Millisecond)
		var remaining time.Duration
		srv := memTransport(t, n, "srv", HandlerFunc(func(ctx context.Context, from string, req []byte) ([]byte, error) {
			dl, _ := ctx.Deadline()
			remaining = time.Until(dl)
			return nil, nil
		}), nil)
		defer srv.Close()
		cli := memTransport(t, n, "cli", nil, func(c *Config) { c.RPCConnsPerPeer = 1 })
		defer cli.Close()
		// Connect first (dial, preface and its answer: two round trips) so
		// the call below measures one request only.
		if _, err := cli.Call(context.Background(), srv.Addr(), nil); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := cli.Call(ctx, srv.Addr(), nil); err != nil {
			t.Fatal(err)
		}
		// The remaining time travels, not the absolute deadline (clocks of
		// two machines differ): the handler gets the full 1s from arrival,
		// so its deadline is one 10ms transit later than the caller's.
		if remaining != time.Second {
			t.Fatalf("handler saw %v remaining, want 1s", remaining)
		}
	})
}

func TestSynctestDroppedConnAndPeerRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		defer n.Close()
		b := newBlocker()
		srv := memTransport(t, n, "srv", b.HandleRPC, nil)
		cli := memTransport(t, n, "cli", nil, nil)
		defer cli.Close()
		ctx := context.Background()

		// A connection reset mid-call fails the call at once and cancels
		// the handler; the next call dials afresh.
		done := make(chan error, 1)
		go func() {
			_, err := cli.Call(ctx, srv.Addr(), nil)
			done <- err
		}()
		<-b.started
		<-b.hasDL
		if got := n.DropConns("cli", "srv"); got != 1 {
			t.Fatalf("dropped %d connections, want 1", got)
		}
		if err := <-done; !errors.Is(err, errConnectionLost) {
			t.Fatalf("call on a reset connection: %v", err)
		}
		if err := <-b.ended; !errors.Is(err, context.Canceled) {
			t.Fatalf("handler ctx: %v", err)
		}
		go func() { <-b.started; <-b.hasDL }()
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		if _, err := cli.Call(cctx, srv.Addr(), nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call after reset: %v", err)
		}
		cancel()
		<-b.ended

		// The peer restarts on the same address: once the client has seen
		// its connections close, the next call reaches the new process.
		srv.Close()
		synctest.Wait()
		srv2 := memTransport(t, n, "srv", echo, nil)
		defer srv2.Close()
		if resp, err := cli.Call(ctx, srv2.Addr(), []byte("again")); err != nil || string(resp) != "echo:again" {
			t.Fatalf("after restart: %q, %v", resp, err)
		}
	})
}

// A raft cluster left idle for far longer than RaftIdleTimeout keeps every
// connection when its nodes speak version 2 (keepalives), and then commits
// at once; legacy (version 1) connections idle in raft's pool are cut. A
// leadership transfer leaves the old leader's connections idle in its pool
// (raft's pipeline connection itself is never idle: the leader sends an
// AppendEntries every CommitTimeout), and a second one reuses them.
func TestSynctestRaftIdleConnsKeptAlive(t *testing.T) {
	for _, tc := range []struct {
		name     string
		identity bool
	}{{"version 2", true}, {"version 1", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := memnet.New()
				defer n.Close()
				var trs []*Transport
				for _, h := range []string{"a", "b", "c"} {
					trs = append(trs, memTransport(t, n, h, echo, func(c *Config) {
						c.RaftIdleTimeout = 3 * time.Second
						if tc.identity {
							c.Identity = func() Identity { return Identity{NodeID: h, ClusterID: "c1"} }
						}
					}))
				}
				all := testEntries(20)
				nodes := startRaftCluster(t, trs, raftTiming{}, len(all))
				applyViaLeader(t, nodes, all[:10], time.Minute)
				transferLeadership(t, nodes)
				time.Sleep(10 * time.Minute)
				var cut float64
				for _, tr := range trs {
					cut += counterValue(t, tr.metrics.raftIdle)
				}
				switch {
				case tc.identity && cut != 0:
					t.Fatalf("%v idle version-2 Raft connections were cut", cut)
				case !tc.identity && cut == 0:
					t.Fatal("no idle version-1 Raft connection was cut (the test does not exercise idle connections)")
				}
				if tc.identity {
					// Over the kept connections, leadership moves at once.
					// (Over cut ones a transfer can fail and the old leader
					// win again: what a cut costs raft.)
					transferLeadership(t, nodes)
				}
				applyViaLeader(t, nodes, all[10:], time.Minute)
				waitApplied(t, nodes, all, time.Minute)
				stopRaftCluster(t, nodes)
			})
		})
	}
}

// transferLeadership moves leadership away from the current leader and
// waits until another node leads.
func transferLeadership(t *testing.T, nodes []*clusterNode) {
	t.Helper()
	for _, nd := range nodes {
		if nd.r.State() != raft.Leader {
			continue
		}
		if err := nd.r.LeadershipTransfer().Error(); err != nil {
			t.Fatalf("leadership transfer: %v", err)
		}
		for range 600 {
			for _, o := range nodes {
				if o != nd && o.r.State() == raft.Leader {
					return
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatal("no new leader after the transfer")
	}
	t.Fatal("no leader")
}

// A follower that fell behind the leader's compacted log catches up through
// InstallSnapshot over version-2 connections: the snapshot stream (whose
// bytes look like hostile msgpack) passes the inbound guard and the chunked
// framing intact.
func TestSynctestRaftInstallSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		defer n.Close()
		hosts := []string{"a", "b", "c"}
		var trs []*Transport
		for _, h := range hosts {
			trs = append(trs, memTransport(t, n, h, echo, func(c *Config) {
				c.Identity = func() Identity { return Identity{NodeID: h, ClusterID: "c1"} }
			}))
		}
		all := testEntries(10)
		for i := range 40 {
			all = append(all, append(fmt.Appendf(nil, "big-%02d:", i), bytes.Repeat([]byte{0xdf, 0xff, 0xff, 0xff, 0xff}, 2000)...))
		}
		nodes := startRaftCluster(t, trs, raftTiming{}, len(all))
		applyViaLeader(t, nodes, all[:10], time.Minute)
		lag := -1
		for i, nd := range nodes {
			if nd.r.State() != raft.Leader {
				lag = i
			}
		}
		var others []string
		for i, h := range hosts {
			if i != lag {
				others = append(others, h)
			}
		}
		n.Partition([]string{hosts[lag]}, others)
		var rest []*clusterNode
		for i, nd := range nodes {
			if i != lag {
				rest = append(rest, nd)
			}
		}
		applyViaLeader(t, rest, all[10:], time.Minute)
		for _, nd := range rest {
			if nd.r.State() == raft.Leader {
				rc := nd.r.ReloadableConfig()
				rc.TrailingLogs = 2
				if err := nd.r.ReloadConfig(rc); err != nil {
					t.Fatal(err)
				}
				if err := nd.r.Snapshot().Error(); err != nil {
					t.Fatalf("leader snapshot: %v", err)
				}
			}
		}
		n.Heal()
		waitApplied(t, nodes, all, 5*time.Minute)
		synctest.Wait() // raft records the install after the FSM restored it
		if got := nodes[lag].r.Stats()["last_snapshot_index"]; got == "0" {
			t.Fatal("the lagging follower caught up without installing a snapshot")
		}
		for _, tr := range trs {
			if v := counterValue(t, tr.metrics.protocol); v != 0 {
				t.Fatalf("%v protocol violations on healthy raft traffic", v)
			}
		}
		stopRaftCluster(t, nodes)
	})
}
