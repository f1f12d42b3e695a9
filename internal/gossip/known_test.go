package gossip

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/storage"
)

// Known peers are saved at most every knownPeersSave while the node runs,
// and whatever changed since is written when it stops (flush): a member
// restarted a second after it first saw the cluster still finds it.
func TestKnownPeersSavedAndFlushed(t *testing.T) {
	store := raft.NewInmemStore()
	reload := func() map[string]string {
		k := &knownPeers{stable: store}
		k.load()
		return k.addrs
	}
	k := &knownPeers{stable: store}
	t0 := time.Unix(1000, 0)
	k.seen("n2", "10.0.0.2:7946")
	k.save(t0)
	if got := reload(); got["n2"] != "10.0.0.2:7946" {
		t.Fatalf("after the first save: %v", got)
	}
	k.seen("n3", "10.0.0.3:7946")
	k.save(t0.Add(time.Second)) // too soon: not written
	if got := reload(); got["n3"] != "" {
		t.Fatalf("saved again within %v: %v", knownPeersSave, got)
	}
	k.flush()
	if got := reload(); got["n3"] != "10.0.0.3:7946" || got["n2"] != "10.0.0.2:7946" {
		t.Fatalf("after flush: %v, want n2 and n3", got)
	}

	// Bad entries in the store are dropped at load; the rest is kept.
	store.Set(storage.KeyKnownPeers, []byte(`{"n4":"10.0.0.4:7946","bad id!":"10.0.0.5:7946","n6":"not an address"}`))
	if got := reload(); len(got) != 1 || got["n4"] != "10.0.0.4:7946" {
		t.Fatalf("loaded %v, want only n4", got)
	}
}

// notify's address for SendReliable: an IP and port from the member table
// (memberlist.Node.Address's format), anything else refused.
func TestMemberlistNodeFromAddress(t *testing.T) {
	for addr, want := range map[string]string{
		"10.0.0.1:7946": "10.0.0.1:7946", "[::1]:7946": "[::1]:7946",
		"host:7946": "", "10.0.0.1:x": "", "10.0.0.1:70000": "", "": "",
	} {
		n, ok := memberlistNode("n1", addr)
		switch {
		case ok != (want != ""):
			t.Errorf("%q: ok %v, want %q", addr, ok, want)
		case ok && (n.Name != "n1" || n.Address() != want):
			t.Errorf("%q: node %s at %s, want n1 at %s", addr, n.Name, n.Address(), want)
		}
	}
}
