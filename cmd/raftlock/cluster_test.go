//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/admin"
	"github.com/raftlock/raftlock/internal/testing/replicaproc"
)

// The tests run the raftlock command in-process (run) against a cluster of
// three examples/replica processes (internal/testing/replicaproc).

type replica = replicaproc.Replica

func startCluster(t *testing.T) []*replica { return replicaproc.Start(t, 3) }

func statusOf(r *replica) (admin.StatusJSON, error) {
	var st admin.StatusJSON
	out, _, code := cli(r, "-o", "json", "-timeout", "2s", "status")
	if code != 0 {
		return st, fmt.Errorf("status exit %d", code)
	}
	return st, json.Unmarshal([]byte(out), &st)
}

// cli runs the raftlock command against replica r (token in the
// environment, stdin empty) and returns its output and exit status.
func cli(r *replica, args ...string) (stdout, stderr string, code int) { return cliIn(r, "", args...) }

// cliIn is cli with stdin.
func cliIn(r *replica, stdin string, args ...string) (stdout, stderr string, code int) {
	var o, e syncBuffer
	env := map[string]string{"RAFTLOCK_ADDR": "http://" + r.HTTP, "RAFTLOCK_ADMIN_TOKEN": replicaproc.Token}
	code = run(context.Background(), args, func(k string) string { return env[k] }, stdio{strings.NewReader(stdin), &o, &e})
	return o.String(), e.String(), code
}

type syncBuffer = replicaproc.Buffer

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	replicaproc.WaitFor(t, timeout, what, cond)
}

// leaderOf returns the replica that leads and one that follows.
func leaderOf(t *testing.T, reps []*replica) (leader, follower *replica) {
	t.Helper()
	st, err := statusOf(reps[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		if r.ID == st.LeaderID {
			leader = r
		} else if follower == nil {
			follower = r
		}
	}
	if leader == nil {
		t.Fatalf("leader %q is none of the replicas", st.LeaderID)
	}
	return leader, follower
}

// lockOf reads lock name through r.
func lockOf(t *testing.T, r *replica, name string) admin.LockJSON {
	t.Helper()
	out, errOut, code := cli(r, "-o", "json", "locks", name)
	if code != 0 {
		t.Fatalf("locks %s: exit %d: %s", name, code, errOut)
	}
	var ls struct{ Locks []admin.LockJSON }
	if err := json.Unmarshal([]byte(out), &ls); err != nil {
		t.Fatal(err)
	}
	for _, l := range ls.Locks {
		if l.Name == name {
			return l
		}
	}
	return admin.LockJSON{Name: name}
}
