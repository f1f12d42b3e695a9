package lockapi

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	_ "modernc.org/sqlite"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
)

// The reference's self-check, end to end: worker A gets token T, its
// keepalives stop (a simulated pause) past the TTL, worker B on another
// replica gets T' > T and writes; A "resumes" and its write is rejected by
// the fence — in memory and in SQLite. A's lease ended before B was granted.
func TestSelfCheckPausedHolderIsFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		a := newSession(t, c, 0)
		b := newSession(t, c, 1)

		db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "docs.db")+"?_txlock=immediate&_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		sqlFence := &fence.SQL{DB: db}
		if err := sqlFence.CreateTable(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`CREATE TABLE docs (id TEXT PRIMARY KEY, body TEXT)`); err != nil {
			t.Fatal(err)
		}
		var memFence fence.Memory
		memDoc := ""
		publish := func(l *Lease, body string) (memErr, sqlErr error) {
			tok := uint64(l.Token())
			memErr = memFence.Do("doc:842", tok, func() error { memDoc = body; return nil })
			sqlErr = sqlFence.Exec(ctx, "doc:842", tok, func(tx *sql.Tx) error {
				_, err := tx.Exec(`INSERT INTO docs VALUES ('doc:842', ?) ON CONFLICT(id) DO UPDATE SET body = excluded.body`, body)
				return err
			})
			return memErr, sqlErr
		}

		la, err := a.Lock(ctx, "doc:842")
		if err != nil {
			t.Fatal(err)
		}
		if m, s := publish(la, "A draft"); m != nil || s != nil {
			t.Fatalf("A's first write: %v %v", m, s)
		}

		type grant struct {
			l  *Lease
			at time.Time
		}
		got := make(chan grant, 1)
		go func() {
			lb, err := b.Lock(ctx, "doc:842")
			if err != nil {
				t.Errorf("B: %v", err)
				close(got)
				return
			}
			select {
			case <-la.Done():
			default:
				t.Errorf("B was granted while A's lease was still valid")
			}
			got <- grant{lb, time.Now()}
		}()
		synctest.Wait() // B is queued

		a.pauseKeepalives(true) // A's process "pauses"
		<-la.Done()
		lostAt := time.Now()
		if !errors.Is(la.Err(), ErrLeaseLost) || !errors.Is(la.Err(), ErrSessionExpired) {
			t.Fatalf("A's lease error: %v", la.Err())
		}
		if !errors.Is(context.Cause(la.Context()), ErrLeaseLost) {
			t.Fatalf("A's lease context cause: %v", context.Cause(la.Context()))
		}
		g, ok := <-got
		if !ok {
			t.FailNow()
		}
		if g.at.Before(lostAt) {
			t.Fatalf("B granted at %v, before A's lease ended at %v", g.at, lostAt)
		}
		if g.l.Token() <= la.Token() {
			t.Fatalf("B's token %d not above A's %d", g.l.Token(), la.Token())
		}
		if m, s := publish(g.l, "B final"); m != nil || s != nil {
			t.Fatalf("B's write: %v %v", m, s)
		}

		// A resumes and tries its delayed write with its old token.
		m, s := publish(la, "A late write")
		if !errors.Is(m, ErrStaleToken) || !errors.Is(s, ErrStaleToken) {
			t.Fatalf("stale write not rejected: memory %v, sql %v", m, s)
		}
		var body string
		db.QueryRow(`SELECT body FROM docs WHERE id = 'doc:842'`).Scan(&body)
		if body != "B final" || memDoc != "B final" {
			t.Fatalf("documents %q / %q, want B's", body, memDoc)
		}

		// Release race: A's late Unlock cannot release B's lock.
		if err := la.Unlock(ctx); !errors.Is(err, ErrNotHolder) {
			t.Fatalf("A's late unlock: %v", err)
		}
		if err := c.Nodes[2].Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if h, ok := c.Nodes[2].Holder("doc:842"); !ok || h.Token != g.l.Token() {
			t.Fatalf("after A's late unlock the holder is %+v %v, want B (token %d)", h, ok, g.l.Token())
		}
		if err := g.l.Unlock(ctx); err != nil {
			t.Fatalf("B's unlock: %v", err)
		}
		if err := g.l.Unlock(ctx); err != nil {
			t.Fatalf("B's second unlock: %v", err)
		}
	})
}
