//go:build linux

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/admin"
	"github.com/raftlock/raftlock/internal/testing/replicaproc"
)

// self is the test binary: run as a command under a lock, it is child.
func self(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// bg runs the raftlock command in the background; wait returns its exit
// status and stderr.
type bg struct {
	done   chan struct{}
	code   int
	stderr string
}

func background(r *replica, args ...string) *bg {
	b := &bg{done: make(chan struct{})}
	go func() { _, b.stderr, b.code = cli(r, args...); close(b.done) }()
	return b
}

func (b *bg) wait(t *testing.T, timeout time.Duration) (int, string) {
	t.Helper()
	select {
	case <-b.done:
		return b.code, b.stderr
	case <-time.After(timeout):
		t.Fatalf("raftlock did not exit within %v", timeout)
		return 0, ""
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// TestCLI runs every command against a running cluster of three replica
// processes.
func TestCLI(t *testing.T) {
	reps := startCluster(t)
	leader, follower := leaderOf(t, reps)
	dir := t.TempDir()
	exe := self(t)

	t.Run("status", func(t *testing.T) {
		out, errOut, code := cli(follower, "status")
		for _, want := range []string{"leader", leader.ID, "fault tolerance", "3 of 3 voters up", "ready"} {
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("status: exit %d, lacks %q:\n%s%s", code, want, out, errOut)
			}
		}
		st, err := statusOf(follower)
		if err != nil || st.ID != follower.ID || st.LeaderID != leader.ID || !st.Health.Ready {
			t.Errorf("status -o json: %+v %v", st, err)
		}
	})

	t.Run("members", func(t *testing.T) {
		out, _, code := cli(leader, "members")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") {
			t.Fatalf("members: exit %d\n%s", code, out)
		}
		for _, r := range reps {
			if !strings.Contains(out, r.ID) {
				t.Errorf("members lacks %s:\n%s", r.ID, out)
			}
		}
		out, _, _ = cli(leader, "-o", "json", "members")
		var ms struct{ Members []admin.MemberJSON }
		if err := json.Unmarshal([]byte(out), &ms); err != nil || len(ms.Members) != 3 {
			t.Errorf("members -o json: %v %s", err, out)
		}
	})

	t.Run("lock runs the command with the lock's variables and returns its status", func(t *testing.T) {
		out, errOut, code := cli(follower, "lock", "-ttl", "3s", "job", "--", exe, "env", "7")
		if code != 7 || !strings.Contains(out, envLockName+"=job\n") {
			t.Fatalf("lock: exit %d (want 7), output %q %q", code, out, errOut)
		}
		tok, err := strconv.ParseUint(strings.TrimPrefix(strings.Split(out, "\n")[1], envLockToken+"="), 10, 64)
		if err != nil || tok == 0 {
			t.Errorf("token variable: %q", out)
		}
		if l := lockOf(t, leader, "job"); l.Held {
			t.Errorf("job still held after the command exited: %+v %+v; %s", l, l.Holder, errOut)
		}
	})

	t.Run("try, locks, sessions, revoke", func(t *testing.T) {
		f := filepath.Join(dir, "held")
		holder := background(follower, "lock", "-ttl", "3s", "held", "--", exe, "hold", f)
		waitFor(t, 20*time.Second, "the command under the lock to start", func() bool { return exists(f + ".started") })
		if _, errOut, code := cli(leader, "lock", "-try", "held", "--", exe, "env", "0"); code != exitNotAcquired || !strings.Contains(errOut, "locked") {
			t.Errorf("lock -try of a held lock: exit %d (want %d) %s", code, exitNotAcquired, errOut)
		}
		if _, _, code := cli(leader, "lock", "-wait", "300ms", "held", "--", exe, "env", "0"); code != exitNotAcquired {
			t.Errorf("lock -wait 300ms of a held lock: exit %d (want %d)", code, exitNotAcquired)
		}
		out, _, code := cli(leader, "locks", "hel")
		if code != 0 || !strings.Contains(out, "held") || !strings.Contains(out, "raftlock lock on") {
			t.Errorf("locks: exit %d\n%s", code, out)
		}
		l := lockOf(t, leader, "held")
		if !l.Held || l.Holder == nil || l.Holder.LeaseLeftMS == nil {
			t.Fatalf("held lock: %+v", l)
		}
		out, _, code = cli(leader, "sessions")
		if code != 0 || !strings.Contains(out, "raftlock lock on") || !strings.Contains(out, strconv.FormatUint(l.Holder.Session, 10)) {
			t.Errorf("sessions: exit %d\n%s", code, out)
		}
		out, errOut, code := cli(leader, "revoke", "held", "-why", "cli test")
		if code != 0 || !strings.Contains(out, "revoked") || !strings.Contains(out, strconv.FormatUint(l.Holder.Token, 10)) {
			t.Fatalf("revoke: exit %d\n%s%s", code, out, errOut)
		}
		code, errOut = holder.wait(t, 20*time.Second)
		if code != exitLeaseLost || !exists(f+".term") || !strings.Contains(errOut, "lost") {
			t.Errorf("after the revoke: exit %d (want %d), SIGTERM seen %v, %s", code, exitLeaseLost, exists(f+".term"), errOut)
		}
		if _, errOut, code := cli(leader, "revoke", "held"); code != exitError || !strings.Contains(errOut, "not_held") {
			t.Errorf("revoke of a free lock: exit %d %s", code, errOut)
		}
	})

	t.Run("semaphore -n", func(t *testing.T) {
		var holders []*bg
		for i := range 2 {
			f := filepath.Join(dir, "pool"+strconv.Itoa(i))
			holders = append(holders, background(reps[i], "lock", "-n", "2", "-ttl", "3s", "pool", "--", exe, "hold", f))
			waitFor(t, 20*time.Second, "a permit", func() bool { return exists(f + ".started") })
		}
		if _, errOut, code := cli(reps[2], "lock", "-n", "2", "-try", "pool", "--", exe, "env", "0"); code != exitNotAcquired {
			t.Errorf("a third permit of 2: exit %d %s", code, errOut)
		}
		l := lockOf(t, leader, "pool")
		if l.Limit != 2 || l.Used != 2 || len(l.Shared) != 2 {
			t.Fatalf("semaphore: %+v", l)
		}
		// Revoking one permit holder by its token ends its lease: its
		// command is stopped (exit as lease lost); the other keeps its
		// permit.
		if _, errOut, code := cli(leader, "revoke", "pool"); code != exitError || !strings.Contains(errOut, "token") {
			t.Errorf("revoke of a semaphore of two holders without a token: exit %d %s", code, errOut)
		}
		revoked := l.Shared[0]
		out, errOut, code := cli(leader, "revoke", "-token-of", strconv.FormatUint(revoked.Token, 10), "pool")
		if code != 0 || !strings.Contains(out, "permits") || !strings.Contains(out, strconv.FormatUint(revoked.Token, 10)) {
			t.Fatalf("revoke of a permit holder: exit %d\n%s%s", code, out, errOut)
		}
		var lost int
		select {
		case <-holders[0].done:
		case <-holders[1].done:
			lost = 1
		case <-time.After(20 * time.Second):
			t.Fatal("no permit holder stopped after its grant was revoked")
		}
		if code, errOut := holders[lost].wait(t, time.Second); code != exitLeaseLost || !strings.Contains(errOut, "lost") {
			t.Errorf("the revoked permit holder: exit %d (want %d) %s", code, exitLeaseLost, errOut)
		}
		if l := lockOf(t, leader, "pool"); l.Used != 1 || len(l.Shared) != 1 || l.Shared[0].Token == revoked.Token {
			t.Errorf("semaphore after the revoke: %+v", l)
		}
		for i, h := range holders {
			if i == lost {
				continue
			}
			os.WriteFile(filepath.Join(dir, "pool"+strconv.Itoa(i)+".stop"), nil, 0o644)
			if code, errOut := h.wait(t, 20*time.Second); code != 0 {
				t.Errorf("permit holder %d: exit %d %s", i, code, errOut)
			}
		}
	})

	t.Run("snapshot save and restore", func(t *testing.T) {
		// The backup has a session holding a lock.
		f := filepath.Join(dir, "snap")
		holder := background(follower, "lock", "-ttl", "3s", "snap", "--", exe, "hold", f)
		waitFor(t, 20*time.Second, "the command under the lock to start", func() bool { return exists(f + ".started") })
		file := filepath.Join(dir, "backup.snap")
		if out, errOut, code := cli(follower, "snapshot", "save", file); code != 0 || !strings.Contains(out, "saved") {
			t.Fatalf("snapshot save: exit %d %s%s", code, out, errOut)
		}
		if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
			t.Fatalf("backup file: %v", err)
		}
		os.WriteFile(f+".stop", nil, 0o644)
		if code, errOut := holder.wait(t, 20*time.Second); code != 0 {
			t.Fatalf("holder: exit %d %s", code, errOut)
		}
		// Not confirmed (stdin ends): nothing restored.
		_, errOut, code := cliIn(follower, "", "snapshot", "restore", file)
		for _, want := range []string{"every session now in the cluster ends", "sessions come back, holding 1 lock (0 acquisitions waiting)",
			"until their TTL (up to 3s) plus the leader's takeover grace runs out", "Restore? [y/N]", "not restored: not confirmed (answer y, or pass -force)"} {
			if code != exitError || !strings.Contains(errOut, want) {
				t.Errorf("snapshot restore without confirmation: exit %d, stderr lacks %q:\n%s", code, want, errOut)
			}
		}
		if l := lockOf(t, leader, "snap"); l.Held {
			t.Errorf("snap is held after a restore that was not confirmed: %+v", l.Holder)
		}
		// Confirmed: the backup's session comes back holding its lock, as
		// the warning said.
		if out, errOut, code := cliIn(follower, "y\n", "snapshot", "restore", file); code != 0 || !strings.Contains(out, "restored") {
			t.Fatalf("snapshot restore, confirmed: exit %d %s%s", code, out, errOut)
		}
		if l := lockOf(t, leader, "snap"); !l.Held || l.Holder == nil || !strings.Contains(l.Holder.Description, "raftlock lock on") {
			t.Errorf("snap after the restore: %+v, want held by the backup's session", l)
		}
		out, errOut, code := cli(follower, "-o", "json", "snapshot", "restore", "-force", file)
		var rr admin.RestoreResponse
		if code != 0 || json.Unmarshal([]byte(out), &rr) != nil || rr.LastToken < rr.BackupLastToken || strings.Contains(errOut, "Restore?") {
			t.Fatalf("snapshot restore -force: exit %d %s%s", code, out, errOut)
		}
		if _, _, code := cli(follower, "snapshot", "restore", "-force", filepath.Join(dir, "nope")); code != exitError {
			t.Errorf("restore of a missing file: exit %d", code)
		}
	})

	t.Run("lock: -lock-delay, and a TTL below the cluster's minimum", func(t *testing.T) {
		f := filepath.Join(dir, "delay")
		holder := background(follower, "lock", "-ttl", "3s", "-lock-delay", "1500ms", "delay", "--", exe, "hold", f)
		waitFor(t, 20*time.Second, "the command under the lock to start", func() bool { return exists(f + ".started") })
		out, _, _ := cli(leader, "-o", "json", "sessions")
		var ss struct{ Sessions []admin.SessionJSON }
		json.Unmarshal([]byte(out), &ss)
		found := false
		for _, s := range ss.Sessions {
			found = found || (s.Locks == 1 && s.LockDelayMS == 1500 && s.TTLMS == 3000 && strings.Contains(s.Description, "raftlock lock on"))
		}
		if !found {
			t.Errorf("no session of TTL 3s with lock-delay 1.5s holding a lock: %s", out)
		}
		os.WriteFile(f+".stop", nil, 0o644)
		if code, errOut := holder.wait(t, 20*time.Second); code != 0 {
			t.Errorf("holder: exit %d %s", code, errOut)
		}
		_, errOut, code := cli(leader, "lock", "-ttl", "100ms", "short", "--", exe, "env", "0")
		if want := "raftlock lock: -ttl 100ms: below this cluster's minimum, 450ms (the replicas' Raft timing sets it)\n"; code != exitUsage || errOut != want {
			t.Errorf("lock -ttl 100ms: exit %d, stderr %q; want %d and %q", code, errOut, exitUsage, want)
		}
	})

	t.Run("leader transfer", func(t *testing.T) {
		target := follower.ID
		out, errOut, code := cli(follower, "-o", "json", "leader", "transfer", target)
		// The replicas then agree on a leader: the target, unless the
		// loaded machine's 50 ms test timing made another election meanwhile
		// (the command then says so and exits 1).
		leader, follower = replicaproc.Leader(t, reps), nil
		for _, r := range reps {
			if r != leader && follower == nil {
				follower = r
			}
		}
		var tr struct {
			LeaderID string `json:"leader_id"`
		}
		switch {
		case code == 0 && json.Unmarshal([]byte(out), &tr) == nil && tr.LeaderID == target:
		case code == exitError && strings.Contains(errOut, "an election intervened"):
			t.Logf("leader transfer: %s", errOut)
		default:
			t.Errorf("leader transfer to %s: exit %d %s%s", target, code, out, errOut)
		}
	})

	t.Run("peer remove refuses a live peer", func(t *testing.T) {
		if _, errOut, code := cli(leader, "peer", "remove", follower.ID); code != exitError || !strings.Contains(errOut, "refused") {
			t.Errorf("peer remove of a live peer: exit %d %s", code, errOut)
		}
	})

	t.Run("usage and authentication errors", func(t *testing.T) {
		for _, args := range [][]string{{"lock", "x"}, {"lock", "x", "--"}, {"-o", "yaml", "status"}, {"frobnicate"},
			{"lock", "-ttl", "3s", "-grace", "2s", "x", "--", "true"}, {"locks", "a", "b"}, {"snapshot", "load", "f"}} {
			if _, _, code := cli(leader, args...); code != exitUsage {
				t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
			}
		}
		if _, errOut, code := cli(leader, "status", "-o", "json"); code != exitUsage || !strings.Contains(errOut, "goes before the command") {
			t.Errorf("a global flag after the command: exit %d %q, want a usage error that says where it goes", code, errOut)
		}
		var o, e syncBuffer
		code := run(context.Background(), []string{"status"}, func(k string) string {
			if k == "RAFTLOCK_ADDR" {
				return "http://" + leader.HTTP
			}
			return ""
		}, stdio{strings.NewReader(""), &o, &e})
		if code != exitError || !strings.Contains(e.String(), "unauthorized") {
			t.Errorf("status without a token: exit %d %s", code, e.String())
		}
	})

	t.Run("lease loss: the command is signalled before the next grant", func(t *testing.T) {
		testLeaseLoss(t, leader, follower, dir, exe)
	})

	t.Run("peer remove of a dead server", func(t *testing.T) {
		leader, follower := leaderOf(t, reps)
		follower.Kill()
		var errOut string
		code := -1
		waitFor(t, 30*time.Second, "the dead server's removal", func() bool {
			_, errOut, code = cli(leader, "peer", "remove", follower.ID)
			return code == 0
		})
		st, err := statusOf(leader)
		if err != nil || len(st.Servers) != 2 {
			t.Errorf("after the removal: %+v %v (%s)", st.Servers, err, errOut)
		}
		for _, s := range st.Servers {
			if s.ID == follower.ID {
				t.Errorf("%s is still a server", follower.ID)
			}
		}
	})

	t.Run("quorum lost: lock says no quorum", func(t *testing.T) {
		// Two servers are left: killing one costs the quorum. raftlock
		// lock's replica answers, but cannot renew the lease.
		var alive []*replica
		for _, r := range reps {
			if !r.Exited() {
				alive = append(alive, r)
			}
		}
		if len(alive) != 2 {
			t.Fatalf("%d replicas alive, want 2", len(alive))
		}
		f := filepath.Join(dir, "quorum")
		holder := background(alive[0], "lock", "-ttl", "3s", "quorum", "--", exe, "hold", f)
		waitFor(t, 20*time.Second, "the command under the lock to start", func() bool { return exists(f + ".started") })
		alive[1].Kill()
		code, errOut := holder.wait(t, 30*time.Second)
		if code != exitLeaseLost || !strings.Contains(errOut, "not renewed in time: no quorum") || !exists(f+".term") {
			t.Errorf("lock through the replica that lost its quorum: exit %d (want %d), SIGTERM seen %v: %s", code, exitLeaseLost, exists(f+".term"), errOut)
		}
	})
}

// testLeaseLoss holds a lock through a follower's API, queues a waiter
// through the leader's, and SIGSTOPs the follower: raftlock cannot renew
// the lease, so it must SIGTERM the command (which ignores it) and then
// SIGKILL it before the cluster expires the session and grants the lock to
// the waiter.
func testLeaseLoss(t *testing.T, leader, follower *replica, dir, exe string) {
	var mu sync.Mutex
	sent := map[syscall.Signal]time.Time{}
	signalled = func(sig syscall.Signal, at time.Time) {
		mu.Lock()
		sent[sig] = at
		mu.Unlock()
	}
	defer func() { signalled = func(syscall.Signal, time.Time) {} }()

	f := filepath.Join(dir, "lost")
	holder := background(follower, "lock", "-ttl", "3s", "lost", "--", exe, "hold", f, "ignore-term")
	waitFor(t, 20*time.Second, "the command under the lock to start", func() bool { return exists(f + ".started") })
	g := filepath.Join(dir, "next")
	waiter := background(leader, "lock", "-ttl", "10s", "-wait", "60s", "lost", "--", exe, "hold", g)
	waitFor(t, 20*time.Second, "the waiter in the queue", func() bool { return lockOf(t, leader, "lost").WaiterCount == 1 })

	follower.Freeze(t)
	frozen := time.Now()
	code, errOut := holder.wait(t, 30*time.Second)
	t.Logf("holder: exit %d: %s", code, errOut)
	deadline := time.Now().Add(30 * time.Second)
	for !exists(g + ".started") {
		if time.Now().After(deadline) {
			l := lockOf(t, leader, "lost")
			t.Fatalf("no grant to the waiter within 30s: %+v holder %+v; waiter: %s", l, l.Holder, waiter.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	l := lockOf(t, leader, "lost")
	follower.Signal(syscall.SIGCONT)
	os.WriteFile(g+".stop", nil, 0o644)
	if c, e := waiter.wait(t, 30*time.Second); c != 0 {
		t.Errorf("waiter: exit %d %s", c, e)
	}

	if code != exitLeaseLost || !strings.Contains(errOut, "SIGTERM") || !strings.Contains(errOut, "SIGKILL") {
		t.Errorf("holder: exit %d (want %d): %s", code, exitLeaseLost, errOut)
	}
	b, err := os.ReadFile(f + ".term")
	if err != nil {
		t.Fatalf("the command never saw SIGTERM: %v", err)
	}
	termNS, _ := strconv.ParseInt(string(b), 10, 64)
	termSeen := time.Unix(0, termNS)
	mu.Lock()
	termAt, killAt := sent[syscall.SIGTERM], sent[syscall.SIGKILL]
	mu.Unlock()
	if !l.Held || l.Holder == nil || l.Holder.AcquiredAtUnixMS == 0 {
		t.Fatalf("the lock after the waiter's grant: %+v", l)
	}
	grant := time.UnixMilli(l.Holder.AcquiredAtUnixMS)
	if termAt.IsZero() || killAt.IsZero() || !termSeen.Before(grant) || !killAt.Before(grant) {
		t.Fatalf("signals not before the next grant: SIGTERM sent %v seen %v, SIGKILL %v, grant %v",
			termAt, termSeen, killAt, grant)
	}
	t.Logf("lease-loss margin (TTL 3s, grace 600ms, replica frozen at 0): SIGTERM sent at +%v (seen by the command at +%v), SIGKILL at +%v, next grant at +%v: the command was SIGTERMed %v and SIGKILLed %v before the next grant",
		termAt.Sub(frozen).Round(time.Millisecond), termSeen.Sub(frozen).Round(time.Millisecond), killAt.Sub(frozen).Round(time.Millisecond),
		grant.Sub(frozen).Round(time.Millisecond), grant.Sub(termSeen).Round(time.Millisecond), grant.Sub(killAt).Round(time.Millisecond))
}
