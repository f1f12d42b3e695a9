package main

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFencedSQL runs the example on a database file of the test's and
// checks the file afterwards: every update counted, the stale write refused.
func TestFencedSQL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "invoices.db")
	var out bytes.Buffer
	err := run(context.Background(), []string{"-db", path, "-workers", "3", "-rounds", "10"}, &out)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"amount = 30 (want 30)", "refused (fence: stale fencing token", "last written by worker-B"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var amount, tok, highest int64
	var by string
	if err := db.QueryRow(`SELECT amount, written_by, token FROM invoices WHERE id = 'invoice:842'`).Scan(&amount, &by, &tok); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT token FROM raftlock_fence WHERE resource = 'invoice:842'`).Scan(&highest); err != nil {
		t.Fatal(err)
	}
	if amount != 31 || by != "worker-B" || tok != highest {
		t.Errorf("invoice: amount %d by %s token %d, fence %d; want 31 by worker-B with the fence's token", amount, by, tok, highest)
	}
}
