// Package fencesuite is the behaviour every fence must show, run against
// each store (in memory, SQLite here; PostgreSQL, MariaDB and Redis in the
// nested module fence/fencetest): racing writers, a stale holder
// after a pause, odd resource names, the token range, and Forget.
package fencesuite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/fence"
)

// Store is a fence together with the data it protects: per resource, a
// current value and a log of every value written, in write order.
type Store interface {
	// Write appends value to resource's log and makes it the current value
	// — a read-modify-write — fenced by token. Refused: an error wrapping
	// fence.ErrStaleToken, and nothing changed.
	Write(ctx context.Context, resource string, token uint64, value string) error
	// State returns resource's current value and its log.
	State(ctx context.Context, resource string) (current string, log []string, err error)
	Highest(ctx context.Context, resource string) (uint64, error)
	Forget(ctx context.Context, resource string, token uint64) error
}

// Config tunes the suite to a store.
type Config struct {
	MaxToken uint64 // the store's highest token (fence.MaxToken or fence.MaxSQLToken)
	Rounds   int    // rounds of two racing writers; default 100
	Writers  int    // writers of the contention test; default 6
	Writes   int    // writes per writer; default 20
}

// Counts are a race test's outcome.
type Counts struct {
	Attempted, Accepted, Rejected, Conflicts, Lost int
}

func (c Counts) String() string {
	return fmt.Sprintf("attempted %d, accepted %d, rejected %d, conflicts %d, lost %d",
		c.Attempted, c.Accepted, c.Rejected, c.Conflicts, c.Lost)
}

// Run runs every test of the suite as subtests of t. Resource names are
// unique to the run, so a persistent server needs no cleanup between runs.
func Run(t *testing.T, s Store, cfg Config) {
	if cfg.Rounds == 0 {
		cfg.Rounds = 100
	}
	if cfg.Writers == 0 {
		cfg.Writers = 6
	}
	if cfg.Writes == 0 {
		cfg.Writes = 20
	}
	run := fmt.Sprintf("t%d/", time.Now().UnixNano())
	t.Run("StaleHolderAfterPause", func(t *testing.T) { staleHolder(t, s, run+"stale") })
	t.Run("TwoWritersRace", func(t *testing.T) { twoWriters(t, s, run+"race", cfg.Rounds) })
	t.Run("ManyWritersOneResource", func(t *testing.T) { manyWriters(t, s, run+"many", cfg.Writers, cfg.Writes) })
	t.Run("OddResourceNames", func(t *testing.T) { oddNames(t, s, run) })
	t.Run("TokenRange", func(t *testing.T) { tokenRange(t, s, run+"tokens", cfg.MaxToken) })
	t.Run("Forget", func(t *testing.T) { forget(t, s, run+"forget") })
}

func expectState(t *testing.T, s Store, resource, current string, log ...string) {
	t.Helper()
	cur, got, err := s.State(context.Background(), resource)
	if err != nil {
		t.Fatalf("state of %q: %v", resource, err)
	}
	if cur != current || strings.Join(got, ",") != strings.Join(log, ",") {
		t.Fatalf("state of %q: current %q log %q; want %q, %q", resource, cur, got, current, log)
	}
}

func expectHighest(t *testing.T, s Store, resource string, want uint64) {
	t.Helper()
	if h, err := s.Highest(context.Background(), resource); err != nil || h != want {
		t.Fatalf("highest of %q: %d, %v; want %d", resource, h, err, want)
	}
}

// The reference's scenario: A (41) writes, pauses past its lease; B (42) is
// granted and writes; A resumes and writes with 41 — refused, B's data kept.
func staleHolder(t *testing.T, s Store, r string) {
	ctx := context.Background()
	if err := s.Write(ctx, r, 41, "A1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, r, 41, "A2"); err != nil {
		t.Fatalf("the same holder writing again: %v", err)
	}
	if err := s.Write(ctx, r, 42, "B1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, r, 41, "A3"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("A's write after B's: %v, want ErrStaleToken", err)
	}
	expectState(t, s, r, "B1", "A1", "A2", "B1")
	expectHighest(t, s, r, 42)
	expectHighest(t, s, r+"/never-written", 0)
}

// Round k: an older writer (token 2k+1) and a newer one (2k+2) start
// together. The newer is always admitted and its value is current after the
// round; the older is admitted only if it got in first. Nothing admitted is
// lost, nothing refused is written.
func twoWriters(t *testing.T, s Store, r string, rounds int) {
	ctx := context.Background()
	var c Counts
	var want []string
	for k := range rounds {
		older, newer := uint64(2*k+1), uint64(2*k+2)
		start := make(chan struct{})
		var errs [2]error
		var wg sync.WaitGroup
		for i, tok := range []uint64{older, newer} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = s.Write(ctx, r, tok, fmt.Sprint(tok))
			}()
		}
		close(start)
		wg.Wait()
		c.Attempted += 2
		if errs[1] != nil {
			t.Fatalf("round %d: the newer writer (%d) failed: %v", k, newer, errs[1])
		}
		switch {
		case errs[0] == nil:
			c.Accepted += 2
			want = append(want, fmt.Sprint(older), fmt.Sprint(newer))
		case errors.Is(errs[0], fence.ErrStaleToken):
			c.Accepted++
			c.Rejected++
			want = append(want, fmt.Sprint(newer))
		case errors.Is(errs[0], fence.ErrConflict):
			c.Accepted++
			c.Conflicts++
			want = append(want, fmt.Sprint(newer))
		default:
			t.Fatalf("round %d: the older writer (%d): %v", k, older, errs[0])
		}
		cur, _, err := s.State(ctx, r)
		if err != nil || cur != fmt.Sprint(newer) {
			t.Fatalf("round %d: current %q, %v; want the newer writer's %d", k, cur, err, newer)
		}
	}
	c.Lost = checkLog(t, s, r, want)
	t.Logf("%d rounds of two racing writers: %v", rounds, c)
}

// checkLog compares resource's log with the admitted writes: admitted
// writes missing from the log are lost; anything else is fatal.
func checkLog(t *testing.T, s Store, r string, admitted []string) (lost int) {
	t.Helper()
	_, log, err := s.State(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]bool{}
	for _, v := range log {
		in[v] = true
	}
	for _, v := range admitted {
		if !in[v] {
			lost++
		}
	}
	if lost > 0 || len(log) != len(admitted) {
		t.Errorf("%d admitted writes lost; log has %d entries, %d admitted", lost, len(log), len(admitted))
	}
	return lost
}

// Writers with interleaved tokens hammer one resource. The log's tokens
// never go down, it holds exactly the admitted writes, and the highest
// token written is admitted (the newest always wins).
func manyWriters(t *testing.T, s Store, r string, writers, writes int) {
	ctx := context.Background()
	var mu sync.Mutex
	var c Counts
	var admitted []string
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range writes {
				tok := uint64(i*writers + w + 1)
				err := s.Write(ctx, r, tok, fmt.Sprintf("%08d", tok))
				mu.Lock()
				c.Attempted++
				switch {
				case err == nil:
					c.Accepted++
					admitted = append(admitted, fmt.Sprintf("%08d", tok))
				case errors.Is(err, fence.ErrStaleToken):
					c.Rejected++
				case errors.Is(err, fence.ErrConflict):
					c.Conflicts++
				default:
					t.Errorf("write %d: %v", tok, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	c.Lost = checkLog(t, s, r, admitted)
	_, log, _ := s.State(ctx, r)
	for i := 1; i < len(log); i++ {
		if log[i] < log[i-1] {
			t.Fatalf("log goes down: %s after %s", log[i], log[i-1])
		}
	}
	top := fmt.Sprintf("%08d", writers*writes)
	if len(log) == 0 || log[len(log)-1] != top {
		t.Fatalf("the newest write (%s) is not the last in the log %v", top, log)
	}
	expectHighest(t, s, r, uint64(writers*writes))
	t.Logf("%d writers × %d writes on one resource: %v", writers, writes, c)
}

// Names are opaque bytes: quotes, SQL and LIKE metacharacters, Redis hash
// tags, spaces, case and Unicode are all distinct resources, and invalid
// names are refused without a write.
func oddNames(t *testing.T, s Store, run string) {
	ctx := context.Background()
	names := []string{
		"a", "A", "a ", " a", "a\t", "a\n", "ä", "a\u0308", "ß", "SS", "🔒 lock",
		`quote ' "double" ` + "`back`", `back\slash`, "percent%_under", "semi; DROP TABLE raftlock_fence; --",
		"{hash}tag", "colon:and/slash", "$1 ?",
	}
	for i, n := range names {
		if err := s.Write(ctx, run+n, uint64(100+i), n); err != nil {
			t.Fatalf("%q: %v", n, err)
		}
	}
	for i, n := range names {
		expectHighest(t, s, run+n, uint64(100+i))
		expectState(t, s, run+n, n, n)
	}
	long := run + strings.Repeat("x", fence.MaxResourceLen-len(run))
	if err := s.Write(ctx, long, 1, "long"); err != nil {
		t.Fatalf("a name of %d bytes: %v", len(long), err)
	}
	expectState(t, s, long, "long", "long")
	for _, bad := range []string{"", long + "x", run + "\xff\xfe", run + "nul\x00byte"} {
		if err := s.Write(ctx, bad, 1, "bad"); !errors.Is(err, fence.ErrInvalid) {
			t.Fatalf("name %q: %v, want ErrInvalid", bad, err)
		}
	}
}

// Token 0 is refused; 1 and the store's maximum are admitted; beyond the
// maximum is refused; after the maximum, lower tokens are stale.
func tokenRange(t *testing.T, s Store, r string, maxToken uint64) {
	ctx := context.Background()
	if err := s.Write(ctx, r, 0, "zero"); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("token 0: %v, want ErrInvalid", err)
	}
	if err := s.Write(ctx, r, 1, "one"); err != nil {
		t.Fatalf("token 1: %v", err)
	}
	if maxToken < fence.MaxToken {
		for _, tok := range []uint64{maxToken + 1, fence.MaxToken} {
			if err := s.Write(ctx, r, tok, "beyond"); !errors.Is(err, fence.ErrInvalid) {
				t.Fatalf("token %d beyond the store's %d: %v, want ErrInvalid", tok, maxToken, err)
			}
		}
	}
	if err := s.Write(ctx, r, maxToken-1, "max-1"); err != nil {
		t.Fatalf("token %d: %v", maxToken-1, err)
	}
	if err := s.Write(ctx, r, maxToken, "max"); err != nil {
		t.Fatalf("token %d: %v", maxToken, err)
	}
	if err := s.Write(ctx, r, maxToken, "max again"); err != nil {
		t.Fatalf("token %d again: %v", maxToken, err)
	}
	if err := s.Write(ctx, r, maxToken-1, "stale"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("token %d after %d: %v, want ErrStaleToken", maxToken-1, maxToken, err)
	}
	expectHighest(t, s, r, maxToken)
	expectState(t, s, r, "max again", "one", "max-1", "max", "max again")
}

// Forget with a stale token is refused and keeps the entry; with the
// current token it drops it (a later write is a first write again).
func forget(t *testing.T, s Store, r string) {
	ctx := context.Background()
	if err := s.Forget(ctx, r+"/unknown", 5); err != nil {
		t.Fatalf("forget an unknown resource: %v", err)
	}
	if err := s.Write(ctx, r, 5, "five"); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, r, 4); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("forget with a stale token: %v, want ErrStaleToken", err)
	}
	expectHighest(t, s, r, 5)
	if err := s.Forget(ctx, r, 5); err != nil {
		t.Fatalf("forget with the current token: %v", err)
	}
	expectHighest(t, s, r, 0)
	if err := s.Write(ctx, r, 3, "three"); err != nil {
		t.Fatalf("a write after Forget: %v", err)
	}
	expectHighest(t, s, r, 3)
}
