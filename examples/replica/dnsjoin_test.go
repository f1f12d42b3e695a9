//go:build linux

package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/raftlock/raftlock/admin"
	"github.com/raftlock/raftlock/internal/testing/replicaproc"
)

// Replicas configured with DNS names (-bind, -gossip, -join as
// localhost:port, as a StatefulSet's pods are) form a cluster: the gossip
// addresses are resolved to IP literals at start (memberlist needs them),
// the join seeds are resolved by gossip at each attempt, and Raft keeps the
// names (dialled, and so resolved, at each connection).
func TestDNSNamesJoin(t *testing.T) {
	reps := replicaproc.StartHost(t, "localhost", 3)
	req, _ := http.NewRequest("GET", "http://"+reps[0].HTTP+"/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+replicaproc.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st admin.StatusJSON
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if len(st.Servers) != 3 || len(st.Members) != 3 {
		t.Fatalf("servers %+v members %+v", st.Servers, st.Members)
	}
	for _, s := range st.Servers {
		if !strings.HasPrefix(s.Addr, "localhost:") {
			t.Errorf("server %s at %s: want the name it was given", s.ID, s.Addr)
		}
	}
	for _, m := range st.Members {
		if !strings.HasPrefix(m.GossipAddr, "127.0.0.1:") {
			t.Errorf("member %s gossips at %q: want an IP literal", m.ID, m.GossipAddr)
		}
	}
}
