package proc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/raftlock/raftlock/internal/devcerts"
)

// The stranger class (issue 20 #1): the replicas run with mutual TLS on the
// Raft/RPC port and no gossip key — the configuration the review attacked —
// and the nemesis starts bare memberlist instances in the harness process
// whose made-up metadata claims to be a raftlock member: with a new id, or
// with the id of a replica it has just killed (taking over its name). A
// member whose identity nobody proved must never enter the configuration
// (cluster-identity: only the replicas, at their own addresses).
//
// TLS without a gossip key is refused unless explicitly allowed: the class
// gives the replicas that permission (-allow-unencrypted-gossip) — it tests
// the permitted configuration.

// strangerArgs are the extra replica flags of the stranger class.
func strangerArgs(dir string, i int) ([]string, error) {
	ca := filepath.Join(dir, "ca.pem")
	cert := filepath.Join(dir, fmt.Sprintf("r%d.pem", i+1))
	key := filepath.Join(dir, fmt.Sprintf("r%d-key.pem", i+1))
	return []string{"-tls-ca", ca, "-tls-cert", cert, "-tls-key", key, "-tls-server-name", "raftlock", "-allow-unencrypted-gossip"}, nil
}

// writeCerts writes a throw-away CA and one certificate per replica.
func writeCerts(dir string, n int) error {
	ca, err := devcerts.NewCA("raftlock-chaos")
	if err != nil {
		return err
	}
	for i := range n {
		caPEM, certPEM, keyPEM, err := ca.PEM(fmt.Sprintf("r%d", i+1))
		if err != nil {
			return err
		}
		for name, b := range map[string][]byte{"ca.pem": caPEM, fmt.Sprintf("r%d.pem", i+1): certPEM, fmt.Sprintf("r%d-key.pem", i+1): keyPEM} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// strangerMeta is the gossip metadata a raftlock member publishes
// (node's memberMeta, version 1, wire version 1).
type strangerMeta struct {
	V    int    `json:"v"`
	Wire int    `json:"wire"`
	ID   string `json:"id"`
	Addr string `json:"addr"`
}

type strangerDelegate struct{ meta []byte }

func (d strangerDelegate) NodeMeta(int) []byte                { return d.meta }
func (strangerDelegate) NotifyMsg([]byte)                     {}
func (strangerDelegate) GetBroadcasts(int, int) [][]byte      { return nil }
func (strangerDelegate) LocalState(bool) []byte               { return nil }
func (strangerDelegate) MergeRemoteState([]byte, bool)        {}
func (x *Harness) strangerAddr(k int) (host string, port int) { return x.net.RelayHost(), 7900 + 2*k }
func (x *Harness) strangerRaftAddr(k int) string {
	h, p := x.strangerAddr(k)
	return fmt.Sprintf("%s:%d", h, p+1)
}
func (x *Harness) gossipAddr(i int) string {
	return fmt.Sprintf("%s:%d", x.net.Host(i), x.net.Port(i, 1))
}
func (x *Harness) strangerName(id string, k int) string { return id }
func (x *Harness) strangerCount() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.strangers++
	return x.strangers
}
func newStrangerLogger() *log.Logger { return log.New(io.Discard, "", 0) }

// startStranger joins the replicas' gossip as member id (its Raft address
// is a port nobody listens on) and returns its shutdown.
func (x *Harness) startStranger(id string) (func(), error) {
	k := x.strangerCount()
	host, port := x.strangerAddr(k)
	meta, _ := json.Marshal(strangerMeta{V: 1, Wire: 1, ID: id, Addr: x.strangerRaftAddr(k)})
	mc := memberlist.DefaultLANConfig()
	mc.Name = x.strangerName(id, k)
	mc.BindAddr, mc.BindPort, mc.AdvertiseAddr, mc.AdvertisePort = host, port, host, port
	mc.Delegate = strangerDelegate{meta: meta}
	mc.Logger = newStrangerLogger()
	mc.ProbeInterval, mc.ProbeTimeout, mc.GossipInterval = 200*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	mc.TCPTimeout = 2 * time.Second
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, err
	}
	var seeds []string
	for i := range x.o.Replicas {
		seeds = append(seeds, x.gossipAddr(i))
	}
	if _, err := ml.Join(seeds); err != nil {
		ml.Shutdown()
		return nil, fmt.Errorf("stranger %s: join: %w", id, err)
	}
	return func() {
		ml.Leave(time.Second)
		ml.Shutdown()
	}, nil
}

// strangerStep: a stranger with a new id joins for a while, or one takes
// the name of a replica the nemesis just killed; sometimes an ordinary
// fault instead.
func (x *Harness) strangerStep(ctx context.Context) {
	r := x.rng
	hold := 2*x.o.TTL + time.Duration(r.Int64N(int64(4*x.o.TTL)))
	switch k := r.IntN(100); {
	case k < 45:
		id := fmt.Sprintf("evil%d", r.IntN(100))
		done := x.fault("stranger-joins", id)
		stop, err := x.startStranger(id)
		if err != nil {
			x.logf("%v", err)
			done()
			return
		}
		x.sleep(ctx, hold)
		stop()
		done()
	case k < 75:
		i := r.IntN(x.o.Replicas)
		id := x.reps[i].id
		done := x.fault("stranger-takes-name", id)
		x.stopReplica(i, syscall.SIGKILL)
		x.sleep(ctx, 2*x.o.TTL) // memberlist lets a dead member's name be reclaimed
		stop, err := x.startStranger(id)
		if err == nil {
			x.sleep(ctx, hold)
			stop()
		} else {
			x.logf("%v", err)
		}
		x.restart(i)
		done()
	default:
		x.mixedStep(ctx, r.IntN(60))
	}
}
