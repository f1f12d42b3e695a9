// Command measure takes the figures of strangers' floods against a node's
// port (issue 46 #1), on loopback, bounded in time:
//
//	go run ./internal/testing/flood/measure -mode election -sources 2 -per 64
//	go run ./internal/testing/flood/measure -mode election -sources 16 -per 16
//	go run ./internal/testing/flood/measure -mode election -sources 0   # control
//	go run ./internal/testing/flood/measure -mode cpu -rate 1000 -sources 1
//
// election: three nodes with mutual TLS in this process (LAN timing) on
// 127.0.0.1; strangers on 127.0.0.2… keep -per connections per node from
// each of -sources addresses in their TLS handshake (one byte, then
// nothing; a connection the node held is re-dialed at once when closed,
// one it refused at once after -backoff). The
// leader is killed; it prints the time until a survivor leads and until a
// command forwarded through the other survivor commits (each capped at
// -max).
//
// cpu: one node's transport with mutual TLS in this process; a child
// process runs -rate TLS handshakes per second without a client
// certificate from -sources addresses for -duration. It prints the CPU
// this process (the node) used, as a fraction of a core, and how the node
// ended the handshakes.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/devcerts"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/flood"
	"github.com/raftlock/raftlock/node"
	"github.com/raftlock/raftlock/transport"
)

// childEnv marks the attacker child of -mode cpu (its value: the target).
const childEnv = "RAFTLOCK_FLOOD_TARGET"

func main() {
	mode := flag.String("mode", "election", "election or cpu")
	sources := flag.Int("sources", 2, "stranger source addresses (127.0.0.2 …); 0: no flood")
	per := flag.Int("per", 64, "election: stalled connections per node from each source")
	maxWait := flag.Duration("max", 60*time.Second, "election: give up waiting for a leader (and the forward) after this long")
	backoff := flag.Duration("backoff", time.Second, "election: a stalled connection the node refused at once is dialed again after this long (one it held, at once)")
	rate := flag.Int("rate", 1000, "cpu: certificate-less handshakes per second")
	duration := flag.Duration("duration", 10*time.Second, "cpu: how long the flood runs")
	flag.Parse()
	log.SetFlags(0)
	if target := os.Getenv(childEnv); target != "" {
		attack(target, *sources, *rate, *duration)
		return
	}
	switch *mode {
	case "election":
		election(*sources, *per, *backoff, *maxWait)
	case "cpu":
		cpu(*sources, *rate, *duration)
	default:
		log.Fatalf("unknown -mode %q", *mode)
	}
}

// election measures a failover under the stall flood.
func election(sources, per int, backoff, maxWait time.Duration) {
	ca, err := devcerts.NewCA("measure")
	check(err)
	var lns []net.Listener
	var peers []node.Peer
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		check(err)
		lns = append(lns, ln)
		peers = append(peers, node.Peer{ID: fmt.Sprintf("n%d", i+1), Addr: ln.Addr().String()})
	}
	var nodes []*node.Node
	for i := range 3 {
		cfg := node.DefaultConfig()
		cfg.ID, cfg.InMemory, cfg.Listener = peers[i].ID, true, lns[i]
		cfg.Bootstrap, cfg.Peers = true, peers
		cfg.TLS, err = ca.MutualTLS(cfg.ID)
		check(err)
		n, err := node.Start(context.Background(), cfg)
		check(err)
		nodes = append(nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	for _, n := range nodes {
		check(n.WaitReady(ctx))
	}
	cancel()
	var targets []string
	for _, p := range peers {
		targets = append(targets, p.Addr)
	}
	var f *flood.Stall
	if sources > 0 {
		f = flood.StartStall(targets, flood.Loopback(2, sources), per, backoff)
		for f.Dials() < int64(f.Slots()) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(2 * time.Second)
		fmt.Printf("flood: %d addresses × %d per node (back-off %v): %d of %d connections open, %d dials\n", sources, per, backoff, f.Open(), f.Slots(), f.Dials())
	}
	leader := -1 // the leader now, with the flood running
	for leader < 0 {
		for i, n := range nodes {
			if n.Status().State == "leader" {
				leader = i
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	kctx, kcancel := context.WithTimeout(context.Background(), 30*time.Second)
	check(nodeopts.Kill(kctx, nodes[leader]))
	kcancel()
	start := time.Now()
	var newLeader, follower *node.Node
	for newLeader == nil && time.Since(start) < maxWait {
		time.Sleep(10 * time.Millisecond)
		for i, n := range nodes {
			if i != leader && n.Status().State == "leader" {
				newLeader = n
			}
		}
	}
	if newLeader == nil {
		fmt.Printf("new leader: none within %v\n", maxWait)
	} else {
		fmt.Printf("new leader: %s after %v\n", newLeader.ID(), time.Since(start).Round(time.Millisecond))
		for i, n := range nodes {
			if i != leader && n != newLeader {
				follower = n
			}
		}
		fwd := time.Now()
		actx, acancel := context.WithTimeout(context.Background(), maxWait)
		_, err := replica.Of(follower).Apply(actx, fsm.OpenSession{TTL: time.Minute})
		acancel()
		if err != nil {
			fmt.Printf("forward through %s: failed after %v: %v\n", follower.ID(), time.Since(fwd).Round(time.Millisecond), err)
		} else {
			fmt.Printf("forward through %s: %v\n", follower.ID(), time.Since(fwd).Round(time.Millisecond))
		}
	}
	if f != nil {
		fmt.Printf("flood: %d dials in all\n", f.Dials())
		f.Stop()
	}
	for i, n := range nodes {
		if i != leader {
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			n.Close(cctx)
			ccancel()
		}
	}
}

// cpu measures what certificate-less TLS handshakes cost the node.
func cpu(sources, rate int, duration time.Duration) {
	ca, err := devcerts.NewCA("measure")
	check(err)
	tlsCfg, err := ca.MutualTLS("srv")
	check(err)
	reg := prometheus.NewRegistry()
	cfg := transport.DefaultConfig()
	cfg.BindAddr, cfg.TLS, cfg.Registerer = "127.0.0.1:0", tlsCfg, reg
	tr, err := transport.New(cfg, nil)
	check(err)
	defer tr.Close()

	idle := cpuTime()
	time.Sleep(time.Second)
	idleFrac := (cpuTime() - idle).Seconds()

	self, err := os.Executable()
	check(err)
	child := exec.Command(self, "-sources", strconv.Itoa(max(sources, 1)), "-rate", strconv.Itoa(rate), "-duration", duration.String())
	child.Env = append(os.Environ(), childEnv+"="+tr.Addr())
	child.Stdout, child.Stderr = os.Stdout, os.Stderr
	before, t0 := cpuTime(), time.Now()
	check(child.Run())
	used, wall := cpuTime()-before, time.Since(t0)
	fmt.Printf("node CPU: %.3f of a core over %v (idle: %.3f)\n", used.Seconds()/wall.Seconds(), wall.Round(time.Millisecond), idleFrac)
	mfs, err := reg.Gather()
	check(err)
	var refused float64
	for _, mf := range mfs {
		if mf.GetName() != "raftlock_transport_handshakes_rejected_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				refused += v
				fmt.Printf("  refused %-22s %6.0f (%.0f/s)\n", m.GetLabel()[0].GetValue(), v, v/wall.Seconds())
			}
		}
	}
	if refused > 0 {
		fmt.Printf("node CPU per refused connection: %.0f µs\n", float64(used.Microseconds())/refused)
	}
}

// attack is the child of -mode cpu.
func attack(target string, sources, rate int, duration time.Duration) {
	f := flood.StartFailTLS(target, flood.Loopback(2, sources), rate, 256)
	time.Sleep(duration)
	f.Stop()
	fmt.Printf("attacker: %d handshakes offered (%.0f/s) from %d addresses; the node answered %d with its certificate\n",
		f.Attempts(), float64(f.Attempts())/duration.Seconds(), sources, f.Answered())
}

// cpuTime is the CPU time (user and system) this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
