//go:build linux && raftwal

package main

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/admin"
)

// TestMigrateLogStoreCommand: a one-replica cluster on bolt takes a lock,
// stops, is converted to the WAL by the subcommand, refuses to start with
// the old -log-store, and starts with the new one keeping its state: the
// same cluster id and Raft id (a fresh store would found a new cluster),
// its log (applied index beyond the one before), and a new lock's token
// above the one taken before.
func TestMigrateLogStoreCommand(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "r1")
	addrs := freePorts(t, 3)
	args := func(store string) []string {
		return []string{"-id", "r1", "-data-dir", data, "-bind", addrs[0], "-gossip", addrs[1], "-http", addrs[2],
			"-bootstrap-expect", "1", "-timing", "test", "-http-no-auth", "-log-store", store}
	}
	r := api{t: t, base: "http://" + addrs[2], hc: &http.Client{}}
	ready := func() bool { st, err := r.status(); return err == nil && st.Ready && st.LeaderID == "r1" }
	stop := func(p *replicaProc) {
		p.signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatal("the replica did not stop within 30 s of SIGTERM")
		}
	}

	p := startReplica(t, "r1", args("bolt"), nil)
	waitUntil(t, 30*time.Second, "r1 on bolt ready", ready)
	var a1 admin.AcquireResponse
	if code := r.do("POST", "/v1/acquire", map[string]any{"lock": "x", "wait": false, "ttl_ms": 3600000}, &a1); code != 200 || a1.Token == 0 {
		t.Fatalf("acquire x: HTTP %d %+v", code, a1)
	}
	before, err := r.status()
	if err != nil {
		t.Fatal(err)
	}
	stop(p)

	var out bytes.Buffer
	if err := run(context.Background(), []string{"migrate-log-store", "-data-dir", data, "-from", "bolt", "-to", "wal"}, envOf(nil), &out); err != nil {
		t.Fatalf("migrate-log-store: %v (%s)", err, out.String())
	}

	p = startReplica(t, "r1", args("bolt"), nil)
	select {
	case <-p.done:
		if !strings.Contains(p.logText(), `holds a "wal" log store`) {
			t.Errorf("start on bolt after the migration failed without saying why:\n%s", p.logText())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the replica started on bolt from a data dir converted to the WAL")
	}

	p = startReplica(t, "r1", args("wal"), nil)
	waitUntil(t, 30*time.Second, "r1 on the WAL ready", ready)
	after, err := r.status()
	if err != nil {
		t.Fatal(err)
	}
	if after.ClusterID != before.ClusterID || after.RaftID != before.RaftID || after.AppliedIndex <= before.AppliedIndex {
		t.Errorf("after the migration: cluster %s, Raft id %s, applied %d; before: %s, %s, %d (want the same cluster and Raft id, and the log kept)",
			after.ClusterID, after.RaftID, after.AppliedIndex, before.ClusterID, before.RaftID, before.AppliedIndex)
	}
	var a2 admin.AcquireResponse
	if code := r.do("POST", "/v1/acquire", map[string]any{"lock": "y", "wait": false}, &a2); code != 200 || a2.Token <= a1.Token {
		t.Errorf("acquire y after the migration: HTTP %d %+v, want a token above %d", code, a2, a1.Token)
	}
	stop(p)
}
