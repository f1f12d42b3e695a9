package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/raftlock/raftlock/fence"
)

// sqlStateError looks like a pgx or lib/pq error with a SQLSTATE.
type sqlStateError string

func (e sqlStateError) Error() string    { return "SQLSTATE " + string(e) }
func (e sqlStateError) SQLState() string { return string(e) }

// A serialization failure runs the whole transaction again, write
// included; the fence update of a failed attempt is rolled back.
func TestSQLRetriesConflicts(t *testing.T) {
	ctx := context.Background()
	f := &fence.SQL{DB: openSQLite(t)}
	if err := f.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	calls := 0
	err := f.Exec(ctx, "r", 3, func(*sql.Tx) error {
		calls++
		if calls < 3 {
			return sqlStateError("40001")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Exec: %v after %d calls; want success on the 3rd", err, calls)
	}

	calls = 0
	err = f.Exec(ctx, "r", 4, func(*sql.Tx) error { calls++; return sqlStateError("40P01") })
	if !errors.Is(err, fence.ErrConflict) || calls != 3 {
		t.Fatalf("Exec: %v after %d calls; want ErrConflict after 3", err, calls)
	}
	var s interface{ SQLState() string }
	if !errors.As(err, &s) || s.SQLState() != "40P01" {
		t.Fatalf("the last failure is not wrapped: %v", err)
	}
	if h, _ := f.Highest(ctx, "r"); h != 3 {
		t.Fatalf("highest %d after failed attempts with token 4; want 3", h)
	}

	// Other errors are not retried; Conflict and Attempts are honoured.
	calls = 0
	other := sqlStateError("23505")
	if err := f.Exec(ctx, "r", 5, func(*sql.Tx) error { calls++; return other }); !errors.Is(err, other) || calls != 1 {
		t.Fatalf("unique violation: %v after %d calls", err, calls)
	}
	mine := errors.New("retry me")
	f.Conflict = func(err error) bool { return errors.Is(err, mine) }
	f.Attempts = 5
	calls = 0
	if err := f.Exec(ctx, "r", 5, func(*sql.Tx) error { calls++; return mine }); !errors.Is(err, fence.ErrConflict) || calls != 5 {
		t.Fatalf("custom Conflict: %v after %d calls", err, calls)
	}
}

// A context that ends stops Exec: no retry, nothing written.
func TestSQLContextEnds(t *testing.T) {
	f := &fence.SQL{DB: openSQLite(t)}
	if err := f.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := f.Exec(ctx, "r", 7, func(tx *sql.Tx) error {
		calls++
		cancel()
		return sqlStateError("40001")
	})
	if err == nil || calls != 1 {
		t.Fatalf("Exec: %v after %d calls", err, calls)
	}
	if err := f.Exec(ctx, "r", 7, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec with an ended context: %v", err)
	}
	if h, _ := f.Highest(context.Background(), "r"); h != 0 {
		t.Fatalf("highest %d, want 0", h)
	}
}

func TestSQLBadConfig(t *testing.T) {
	ctx := context.Background()
	for _, f := range []*fence.SQL{
		{},
		{DB: openSQLite(t), Dialect: fence.Dialect(42)},
		{DB: openSQLite(t), Table: "a-b"},
	} {
		if err := f.Exec(ctx, "r", 1, nil); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("%+v: Exec: %v, want ErrInvalid", f, err)
		}
		if _, err := f.Highest(ctx, "r"); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("%+v: Highest: %v, want ErrInvalid", f, err)
		}
		if err := f.CreateTable(ctx); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("%+v: CreateTable: %v, want ErrInvalid", f, err)
		}
	}
}
