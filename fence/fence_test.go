package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/raftlock/raftlock/fence"
)

func TestMemoryFence(t *testing.T) {
	rejected := 0
	f := fence.Memory{OnReject: func(string, uint64, uint64) { rejected++ }}
	if err := f.Admit("doc", 5); err != nil {
		t.Fatal(err)
	}
	if err := f.Admit("doc", 5); err != nil {
		t.Fatalf("same token again: %v", err)
	}
	if err := f.Admit("doc", 7); err != nil {
		t.Fatal(err)
	}
	ran := false
	err := f.Do("doc", 6, func() error { ran = true; return nil })
	if !errors.Is(err, fence.ErrStaleToken) || ran {
		t.Fatalf("stale token: err %v, write ran %v", err, ran)
	}
	if rejected != 1 {
		t.Fatalf("OnReject called %d times", rejected)
	}
	if err := f.Admit("other", 1); err != nil {
		t.Fatalf("resources are independent: %v", err)
	}
	if f.Highest("doc") != 7 {
		t.Fatalf("highest %d", f.Highest("doc"))
	}
	for _, bad := range []struct {
		r string
		t uint64
	}{{"", 1}, {"x", 0}} {
		if err := f.Admit(bad.r, bad.t); !errors.Is(err, fence.ErrInvalid) {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
}

func TestMemoryFenceSerializesWrites(t *testing.T) {
	var f fence.Memory
	var mu sync.Mutex
	inside, maxInside := 0, 0
	var wg sync.WaitGroup
	for i := 1; i <= 50; i++ {
		wg.Add(1)
		go func(tok uint64) {
			defer wg.Done()
			f.Do("r", tok, func() error {
				mu.Lock()
				inside++
				maxInside = max(maxInside, inside)
				mu.Unlock()
				mu.Lock()
				inside--
				mu.Unlock()
				return nil
			})
		}(uint64(i))
	}
	wg.Wait()
	if maxInside != 1 {
		t.Fatalf("%d writes of one resource ran at once", maxInside)
	}
	if f.Highest("r") != 50 {
		t.Fatalf("highest %d, want 50", f.Highest("r"))
	}
}

func openSQLite(t *testing.T) *sql.DB { return openSQLiteTimeout(t, 5000) }

// openSQLiteTimeout opens a fresh SQLite database whose transactions take
// the write lock at BEGIN and wait up to busyMillis for it.
func openSQLiteTimeout(t *testing.T, busyMillis int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", fmt.Sprintf("file:%s?_txlock=immediate&_pragma=busy_timeout(%d)", filepath.Join(t.TempDir(), "f.db"), busyMillis))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestSQLFenceSQLite(t *testing.T) {
	ctx := context.Background()
	db := openSQLite(t)
	var rejectedAt [2]uint64
	f := &fence.SQL{DB: db, OnReject: func(_ string, tok, highest uint64) { rejectedAt = [2]uint64{tok, highest} }}
	if err := f.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE docs (id TEXT PRIMARY KEY, body TEXT, token INTEGER)`); err != nil {
		t.Fatal(err)
	}
	write := func(tok uint64, body string) error {
		return f.Exec(ctx, "doc:1", tok, func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO docs VALUES ('doc:1', ?, ?) ON CONFLICT(id) DO UPDATE SET body = excluded.body, token = excluded.token`, body, tok)
			return err
		})
	}
	if err := write(41, "from 41"); err != nil {
		t.Fatal(err)
	}
	if err := write(42, "from 42"); err != nil {
		t.Fatal(err)
	}
	// The stale holder resumes: refused, and its write did not happen.
	if err := write(41, "late write from 41"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("stale write: %v", err)
	}
	if rejectedAt != [2]uint64{41, 42} {
		t.Fatalf("OnReject saw %v", rejectedAt)
	}
	var body string
	db.QueryRow(`SELECT body FROM docs WHERE id = 'doc:1'`).Scan(&body)
	if body != "from 42" {
		t.Fatalf("body %q", body)
	}
	// A failing write rolls back the fence update too.
	boom := errors.New("boom")
	if err := f.Exec(ctx, "doc:1", 50, func(*sql.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if h, _ := f.Highest(ctx, "doc:1"); h != 42 {
		t.Fatalf("highest after a rolled-back write: %d", h)
	}
	if err := f.Exec(ctx, "", 1, nil); !errors.Is(err, fence.ErrInvalid) {
		t.Fatal(err)
	}
	bad := &fence.SQL{DB: db, Table: "x; DROP TABLE docs"}
	if err := bad.Exec(ctx, "r", 1, nil); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("bad table name: %v", err)
	}
}

// Concurrent writers with interleaved tokens: the stored token never goes
// down, and exactly the writes whose token was >= the stored one at the
// time committed.
func TestSQLFenceConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	db := openSQLite(t)
	f := &fence.SQL{DB: db}
	if err := f.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	db.Exec(`CREATE TABLE log (token INTEGER)`)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				tok := uint64(i*8 + w + 1)
				err := f.Exec(ctx, "r", tok, func(tx *sql.Tx) error {
					_, err := tx.Exec(`INSERT INTO log VALUES (?)`, tok)
					return err
				})
				if err != nil && !errors.Is(err, fence.ErrStaleToken) {
					t.Errorf("write %d: %v", tok, err)
				}
			}
		}(w)
	}
	wg.Wait()
	rows, err := db.Query(`SELECT token FROM log ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var prev int64
	n := 0
	for rows.Next() {
		var tok int64
		rows.Scan(&tok)
		if tok < prev {
			t.Fatalf("committed token %d after %d", tok, prev)
		}
		prev = tok
		n++
	}
	if n == 0 {
		t.Fatal("no write committed")
	}
}
