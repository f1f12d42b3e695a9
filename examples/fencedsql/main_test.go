package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/raftlock/raftlock/fence"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func runExample(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, &out)
	t.Logf("fencedsql %s:\n%s", strings.Join(args, " "), out.String())
	return out.String(), err
}

func checkOutput(t *testing.T, out string, amount int) {
	t.Helper()
	for _, want := range []string{fmt.Sprintf("amount = %d (want %d)", amount, amount), "refused (fence: stale fencing token", "last written by worker-B"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// checkRows reads the invoice and the fence row back from the database:
// every update counted (+1 for B's), B's write kept, the fence at B's token.
func checkRows(t *testing.T, db *sql.DB, q func(string) string, amount int64) {
	t.Helper()
	var got, tok, highest int64
	var by string
	if err := db.QueryRow(q(`SELECT amount, written_by, token FROM invoices WHERE id = ?`), invoice).Scan(&got, &by, &tok); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(q(`SELECT token FROM raftlock_fence WHERE resource = ?`), invoice).Scan(&highest); err != nil {
		t.Fatal(err)
	}
	if got != amount || by != "worker-B" || tok != highest {
		t.Errorf("invoice: amount %d by %s token %d, fence %d; want %d by worker-B with the fence's token", got, by, tok, highest, amount)
	}
}

// TestFencedSQL runs the example on a SQLite file of the test's and checks
// the file afterwards; a second run on the same file stops because the
// fence is ahead of the new cluster, unless -reset-fence.
func TestFencedSQL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "invoices.db")
	out, err := runExample(t, "-db", path, "-workers", "3", "-rounds", "10")
	if err != nil {
		t.Fatal(err)
	}
	checkOutput(t, out, 30)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkRows(t, db, fence.SQLite.Bind, 31)

	if _, err := runExample(t, "-db", path, "-workers", "2", "-rounds", "2"); !errors.Is(err, errFenceAhead) {
		t.Fatalf("second run on the same database: %v, want errFenceAhead", err)
	}
	out, err = runExample(t, "-db", path, "-workers", "2", "-rounds", "2", "-reset-fence")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "forgot the fence's token") {
		t.Error("the reset is not reported")
	}
	checkOutput(t, out, 4)
	checkRows(t, db, fence.SQLite.Bind, 5)
}

func TestFencedSQLBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-workers", "0"}, {"-rounds", "-1"}, {"extra"}, {"-db", "x.db", "-postgres", "postgres://h/db"}} {
		if _, err := runExample(t, args...); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// TestFencedSQLPostgres runs the example with -postgres in a database of
// its own on the server that fence/fencetest/servers.sh started.
func TestFencedSQLPostgres(t *testing.T) {
	dsn := os.Getenv("RAFTLOCK_TEST_POSTGRES")
	if dsn == "" {
		msg := "RAFTLOCK_TEST_POSTGRES is not set: run with a PostgreSQL server through `bash fence/fencetest/servers.sh` (from the repository root)"
		if os.Getenv("RAFTLOCK_FENCE_SERVERS") == "required" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	name := fmt.Sprintf("fencedsql_%d", time.Now().UnixNano())
	if _, err := admin.Exec(`CREATE DATABASE ` + name); err != nil {
		t.Fatal(err)
	}
	defer admin.Exec(`DROP DATABASE ` + name + ` WITH (FORCE)`)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	out, err := runExample(t, "-postgres", u.String(), "-workers", "3", "-rounds", "10")
	if err != nil {
		t.Fatal(err)
	}
	checkOutput(t, out, 30)
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkRows(t, db, fence.PostgreSQL.Bind, 31)
}
