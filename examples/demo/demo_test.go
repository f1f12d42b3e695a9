//go:build unix

package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The test binary doubles as the replica program: the demo re-executes
// itself (os.Executable) with childEnv set.
func TestMain(m *testing.M) {
	maybeRunChild()
	goleak.VerifyTestMain(m)
}

// pids collects the replica processes a run started.
type pids struct {
	mu   sync.Mutex
	list []int
}

func (p *pids) add(pid int) {
	p.mu.Lock()
	p.list = append(p.list, pid)
	p.mu.Unlock()
}

// checkGone fails the test if a replica process is still running. (Every
// replica is waited for by the demo, so its pid is free unless reused.)
func (p *pids) checkGone(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pid := range p.list {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
			if bytes.Contains(b, []byte(childEnv+"=")) {
				t.Errorf("replica process %d is still running", pid)
				syscall.Kill(pid, syscall.SIGCONT)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the narrator and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDemo runs the whole demo (short mode: every step, shorter phases) and
// checks what it found, from its results file and its output, and that
// examples/README.md's excerpt of a run matches that output.
func TestDemo(t *testing.T) {
	out := runDemo(t, "")
	checkREADMEExcerpt(t, out)
}

// TestDemoOnPostgres: the same story with -postgres, the shared database a
// schema of the run's own in PostgreSQL (RAFTLOCK_TEST_POSTGRES; .ci/run
// starts a server through fence/fencetest/servers.sh), dropped at
// the end.
func TestDemoOnPostgres(t *testing.T) {
	pg := os.Getenv("RAFTLOCK_TEST_POSTGRES")
	if pg == "" {
		msg := "RAFTLOCK_TEST_POSTGRES is not set: run `bash fence/fencetest/servers.sh go test -run TestDemoOnPostgres ./examples/demo/` from the repository root"
		if os.Getenv("RAFTLOCK_FENCE_SERVERS") == "required" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	out := runDemo(t, pg)
	if !strings.Contains(out, "shared database: PostgreSQL, schema raftlock_demo_") {
		t.Errorf("the demo did not say it used PostgreSQL")
	}
	db, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var left int
	if err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name LIKE 'raftlock_demo_%'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("schemas of the demo left in PostgreSQL: %d (%v)", left, err)
	}
}

// runDemo runs the whole demo (short mode) on SQLite or, with postgres, on
// PostgreSQL, checks what it found, and returns its output.
func runDemo(t *testing.T, postgres string) string {
	var out syncBuffer
	var ps pids
	root := t.TempDir()
	jsonPath := filepath.Join(root, "results.json")
	start := time.Now()
	err := run(context.Background(), options{short: true, jsonPath: jsonPath, timeout: 150 * time.Second, out: &out, tmpRoot: root, started: ps.add, postgres: postgres})
	t.Logf("demo output (%v):\n%s", time.Since(start).Round(time.Millisecond), out.String())
	ps.checkGone(t)
	if left, _ := filepath.Glob(filepath.Join(root, "raftlock-demo-*")); len(left) > 0 {
		t.Errorf("data directory not removed: %v", left)
	}
	if err != nil {
		t.Fatalf("demo failed: %v", err)
	}
	if len(ps.list) < 5 {
		t.Errorf("started %d replica processes, want 5 (3, then 2 restarts; more if a port was taken)", len(ps.list))
	}

	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var res results
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if !res.OK {
		t.Errorf("results not ok: %s", b)
	}

	// A stale write was rejected, with both tokens.
	s := res.Stale
	if !s.Rejected || s.Accepted || s.StaleToken == 0 || s.StaleToken >= s.NewToken || s.Highest < s.NewToken || res.Totals.Rejected < 1 {
		t.Errorf("stale write: %+v, %d rejected in all", s, res.Totals.Rejected)
	}
	if s.Holder == s.NewHolder || s.FrozenMS < 3000 {
		t.Errorf("stale write: holder %s, new holder %s, frozen %dms (want > TTL)", s.Holder, s.NewHolder, s.FrozenMS)
	}

	// Tokens strictly increased per lock, over every grant of every replica.
	if res.Totals.Grants < 20 || len(res.Locks) < 5 {
		t.Errorf("only %d grants of %d locks", res.Totals.Grants, len(res.Locks))
	}
	for _, l := range res.Locks {
		if !l.Increasing || l.FirstToken > l.LastToken {
			t.Errorf("lock %s: tokens not strictly increasing: %+v", l.Lock, l)
		}
	}

	// Failover happened, and the singleton left the dead leader.
	f := res.Failover
	if f.Killed == "" || f.NewLeader == "" || f.NewLeader == f.Killed || f.FailoverMS <= 0 || f.ProbeToken == 0 {
		t.Errorf("failover: %+v", f)
	}
	if f.SingletonTo == f.Killed || f.SingletonTo == "" {
		t.Errorf("singleton did not leave the killed leader: %+v", f)
	}

	// Without a quorum: refused, nothing granted or renewed, the lease ended;
	// grants resumed after the restart.
	q := res.NoQuorum
	if q.TryLockStatus != 503 || q.TryLockError != "no_quorum" {
		t.Errorf("TryLock without quorum: HTTP %d %q", q.TryLockStatus, q.TryLockError)
	}
	if q.GrantsWithoutQuorum != 0 || q.RenewalsOK != 0 || q.RenewalsFailed == 0 || !q.LeaseEnded {
		t.Errorf("without quorum: %+v", q)
	}
	if q.GrantsAfterRestart == 0 || q.RecoveryToken == 0 {
		t.Errorf("grants did not resume: %+v", q)
	}
	for _, inv := range res.Invariants {
		if !inv.OK {
			t.Errorf("invariant %q failed: %s", inv.Name, inv.Detail)
		}
	}
	for _, want := range []string{"the fence REJECTED the stale write", "no_quorum", "recovered:", "all invariants held"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "\x1b[") {
		t.Error("colour codes in output that is not a terminal")
	}
	// Tokens readably: the first in full, once, the others as T+n.
	if long := regexp.MustCompile(`\b\d{13,}\b`).FindAllString(out.String(), -1); len(long) != 1 ||
		!regexp.MustCompile(`REJECTED the stale write: token T\+\d+ < T\+\d+`).MatchString(out.String()) {
		t.Errorf("tokens shown in full %d times (want once, then as T+n): %v", len(long), long)
	}
	return out.String()
}

// TestDemoDeadline: when the overall deadline passes mid-story, the demo
// fails cleanly — no replica process left, the data directory removed.
func TestDemoDeadline(t *testing.T) {
	var out syncBuffer
	var ps pids
	root := t.TempDir()
	err := run(context.Background(), options{short: true, timeout: 4 * time.Second, out: &out, tmpRoot: root, started: ps.add})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("run with a 4s deadline: %v, want a deadline error\n%s", err, out.String())
	}
	ps.checkGone(t)
	if len(ps.list) == 0 {
		t.Error("no replica was started")
	}
	if left, _ := filepath.Glob(filepath.Join(root, "raftlock-demo-*")); len(left) > 0 {
		t.Errorf("data directory not removed: %v", left)
	}
}
