package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/raftlock/raftlock/fence"
)

// Issue 20 #6: OnReject runs without the resource lock held, so a callback
// may use the fence (here: Highest and Admit on the same resource). Before
// the fix this deadlocked in Highest (the test hung until its timeout).
func TestMemoryOnRejectRunsWithoutLocks(t *testing.T) {
	var f fence.Memory
	var seen []uint64
	f.OnReject = func(resource string, token, highest uint64) {
		seen = append(seen, token, highest, f.Highest(resource))
		if err := f.Admit(resource, highest); err != nil {
			t.Errorf("Admit from OnReject: %v", err)
		}
	}
	if err := f.Admit("doc", 7); err != nil {
		t.Fatal(err)
	}
	if err := f.Admit("doc", 3); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("stale admit: %v", err)
	}
	if fmt.Sprint(seen) != "[3 7 7]" {
		t.Fatalf("OnReject saw %v, want [3 7 7]", seen)
	}
}

// Issue 20 #6: Highest must not create entries (a reader probing many
// names would otherwise grow the fence without bound). Before the fix,
// 1000 Highest calls on unknown names left 1000 entries.
func TestMemoryHighestCreatesNoEntry(t *testing.T) {
	var f fence.Memory
	for i := range 1000 {
		if h := f.Highest(fmt.Sprintf("r%d", i)); h != 0 {
			t.Fatalf("highest of an unknown resource: %d", h)
		}
	}
	if n := f.Len(); n != 0 {
		t.Fatalf("%d entries after Highest on unknown resources, want 0", n)
	}
	if err := f.Admit("r1", 1); err != nil {
		t.Fatal(err)
	}
	if n := f.Len(); n != 1 {
		t.Fatalf("%d entries after one Admit, want 1", n)
	}
}

// openSQLiteBusy opens a SQLite database whose writers give up after a
// short busy timeout, so a leaked transaction shows as "database is locked"
// rather than as a hang.
func openSQLiteBusy(t *testing.T) *sql.DB { return openSQLiteTimeout(t, 200) }

// Issue 20 #6: fence.SQL calls OnReject after the transaction was rolled
// back, so the callback can use the database (here: write an audit row).
// Before the fix it ran inside the open transaction and its write failed
// with "database is locked".
func TestSQLOnRejectRunsAfterRollback(t *testing.T) {
	ctx := context.Background()
	db := openSQLiteBusy(t)
	var cbErr error
	calls := 0
	f := &fence.SQL{DB: db, OnReject: func(resource string, token, highest uint64) {
		calls++
		_, cbErr = db.ExecContext(ctx, `INSERT INTO audit VALUES (?, ?, ?)`, resource, int64(token), int64(highest))
	}}
	if err := f.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE audit (resource TEXT, token INTEGER, highest INTEGER)`); err != nil {
		t.Fatal(err)
	}
	if err := f.Exec(ctx, "doc", 9, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Exec(ctx, "doc", 4, nil); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("stale exec: %v", err)
	}
	if calls != 1 || cbErr != nil {
		t.Fatalf("OnReject: %d calls, its write failed: %v", calls, cbErr)
	}
	var tok, highest int64
	if err := db.QueryRow(`SELECT token, highest FROM audit WHERE resource = 'doc'`).Scan(&tok, &highest); err != nil {
		t.Fatal(err)
	}
	if tok != 4 || highest != 9 {
		t.Fatalf("audit row: token %d highest %d", tok, highest)
	}
}

// Issue 20 #6: a panicking write rolls the transaction back and the panic
// reaches the caller unchanged; the next Exec works. Before the fix the
// transaction leaked and the next Exec failed with "database is locked".
func TestSQLExecRollsBackOnPanic(t *testing.T) {
	ctx := context.Background()
	db := openSQLiteBusy(t)
	f := &fence.SQL{DB: db}
	if err := f.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	type boom struct{ n int }
	func() {
		defer func() {
			if p := recover(); p != (boom{7}) {
				t.Fatalf("recovered %v, want the write's panic value", p)
			}
		}()
		f.Exec(ctx, "doc", 5, func(*sql.Tx) error { panic(boom{7}) })
	}()
	if err := f.Exec(ctx, "doc", 6, nil); err != nil {
		t.Fatalf("Exec after a panicking write: %v", err)
	}
	if h, err := f.Highest(ctx, "doc"); err != nil || h != 6 {
		t.Fatalf("highest %d, %v; want 6 (the panicking write's token 5 rolled back, then 6)", h, err)
	}
	if err := f.Exec(ctx, "doc", 5, nil); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("token 5 after 6: %v", err)
	}
}

// Forget racing with Do: writes of one resource still run one at a time
// (a Do that waited on a forgotten entry moves to the new one).
func TestMemoryForgetKeepsWritesExclusive(t *testing.T) {
	var f fence.Memory
	var mu sync.Mutex
	inside, maxInside, writes := 0, 0, 0
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				if (g+i)%3 == 0 {
					if err := f.Forget("r", 1); err != nil {
						t.Errorf("forget: %v", err)
					}
					continue
				}
				err := f.Do("r", 1, func() error {
					mu.Lock()
					inside++
					maxInside = max(maxInside, inside)
					writes++
					mu.Unlock()
					runtime.Gosched()
					mu.Lock()
					inside--
					mu.Unlock()
					return nil
				})
				if err != nil {
					t.Errorf("do: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if maxInside != 1 || writes == 0 {
		t.Fatalf("%d writes of one resource ran at once (%d writes)", maxInside, writes)
	}
	if n := f.Len(); n > 1 {
		t.Fatalf("%d entries for one resource", n)
	}
}
