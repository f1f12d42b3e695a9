package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// SQL is a fence kept in a database table, one row per resource with the
// highest token admitted. Exec performs the fence check and the protected
// write in one transaction: either both commit or neither does, so a stale
// holder can never write, even if it was paused between its check and its
// write.
//
// The check runs first in the transaction and locks the resource's fence
// row until commit or rollback:
//
//   - SQLite, PostgreSQL: a conditional upsert, INSERT … ON CONFLICT
//     (resource) DO UPDATE SET token = excluded.token WHERE f.token <=
//     excluded.token, which changes no row when a higher token is stored
//     (PostgreSQL locks the row even then).
//   - MySQL, MariaDB: SELECT token … FOR UPDATE, compared in Go, then UPDATE
//     if higher. A missing row is first created with token 0 by its own
//     statement outside the transaction, so concurrent first writers do not
//     deadlock on InnoDB's gap locks.
//
// # Isolation
//
// Any isolation level is correct, and READ COMMITTED (the default of
// PostgreSQL; MySQL's is REPEATABLE READ) is enough: the row lock orders the
// writers of one resource, and a writer's statements after the check see
// every earlier writer's commit — under READ COMMITTED each statement reads
// the latest commits; under PostgreSQL's REPEATABLE READ and SERIALIZABLE
// the snapshot is taken by the check itself, and a check that had to wait
// for a concurrent writer fails with a serialization failure instead of
// reading old data; InnoDB takes its snapshot at the first plain read, after
// the check's locking read. What the fence cannot order are data that other
// code writes without it, or under another resource name: give every piece
// of protected data one resource name, and let every writer go through the
// fence.
//
// Serialization failures and deadlocks (SQLSTATE 40001 and 40P01; see
// Conflict) are retried: Exec runs the whole transaction again, write
// included, up to Attempts times (after a short random backoff), then
// returns an error wrapping ErrConflict.
// write must therefore touch nothing but its transaction.
//
// For SQLite, open the database so that transactions take the write lock at
// BEGIN (modernc.org/sqlite: "_txlock=immediate" and a busy_timeout in the
// DSN); otherwise concurrent writers may fail with SQLITE_BUSY.
//
// PostgreSQL:
//
//	f := &fence.SQL{DB: pg, Dialect: fence.PostgreSQL}
//	err := f.CreateTable(ctx) // resource TEXT COLLATE "C" PRIMARY KEY, token BIGINT NOT NULL
//	err = f.Exec(lease.Context(), "invoice:842", uint64(lease.Token()), func(tx *sql.Tx) error {
//		_, err := tx.Exec(`UPDATE invoices SET state = 'final' WHERE id = $1`, 842)
//		return err
//	})
//
// The table holds one row per resource ever written; see Forget and the
// package doc on cleanup. SQL is safe for concurrent use once configured; do
// not change its fields afterwards. DB must be set; the zero Dialect is
// SQLite, the zero Table is DefaultTable.
type SQL struct {
	DB      *sql.DB
	Dialect Dialect
	// Table is the fence table (letters, digits, _ and an optional
	// "schema." prefix); default DefaultTable.
	Table string
	// TxOptions are Exec's transaction options (isolation level); nil: the
	// database's default.
	TxOptions *sql.TxOptions
	// Attempts is how often Exec runs its transaction when it fails with a
	// conflict; 0 means 3.
	Attempts int
	// Conflict reports whether a failed transaction is worth running again
	// (a serialization failure or deadlock). Nil: an error with a SQLState()
	// method (pgx, lib/pq) reporting 40001 or 40P01. For go-sql-driver/mysql:
	//	func(err error) bool { var e *mysql.MySQLError; return errors.As(err, &e) && e.Number == 1213 }
	Conflict func(error) bool
	// OnReject, if set, is called for every refused stale write or forget
	// (metrics, logging), after the transaction was rolled back; highest is
	// the token that refused it.
	OnReject func(resource string, token, highest uint64)
}

// ErrConflict: the transaction kept failing with serialization failures or
// deadlocks; nothing was written. The error also wraps the last failure.
var ErrConflict = errors.New("fence: transaction conflict")

// errNoRow: the MySQL check found no fence row (it is created, then the
// transaction runs again).
var errNoRow = errors.New("fence: no fence row")

func (f *SQL) statements() (statements, error) {
	if f.DB == nil {
		return statements{}, fmt.Errorf("%w: SQL.DB is nil", ErrInvalid)
	}
	return sqlStatements(f.Dialect, f.Table)
}

// CreateTable creates the fence table if it does not exist.
func (f *SQL) CreateTable(ctx context.Context) error {
	st, err := f.statements()
	if err != nil {
		return err
	}
	if _, err := f.DB.ExecContext(ctx, st.create); err != nil {
		return fmt.Errorf("fence: create table: %w", err)
	}
	return nil
}

// Exec begins a transaction, admits token for resource (or returns an error
// wrapping ErrStaleToken without calling write), calls write with the
// transaction, and commits. If write returns an error, or ctx ends, the
// transaction is rolled back — fence update included. If write panics, the
// transaction is rolled back and the panic goes on. A conflict runs the
// transaction again (see the type's doc), write included.
//
// Pass the lease's context as ctx: if the lease is lost before commit, the
// transaction is abandoned (the fence would still protect the data, but
// stopping early avoids wasted work).
func (f *SQL) Exec(ctx context.Context, resource string, token uint64, write func(tx *sql.Tx) error) error {
	if err := check(resource, token, MaxSQLToken); err != nil {
		return err
	}
	st, err := f.statements()
	if err != nil {
		return err
	}
	attempts := f.Attempts
	if attempts <= 0 {
		attempts = 3
	}
	for n, created := 1, 0; ; {
		rejected, highest, err := f.attempt(ctx, st, resource, token, write)
		switch {
		case rejected:
			if f.OnReject != nil {
				f.OnReject(resource, token, highest)
			}
			return staleError(resource, token, highest)
		case err == nil:
			return nil
		case errors.Is(err, errNoRow) && created < 3:
			created++
			if _, err := f.DB.ExecContext(ctx, st.ensureRow, resource); err != nil {
				return fmt.Errorf("fence: create row of %q: %w", resource, err)
			}
			continue
		case !f.isConflict(err) || ctx.Err() != nil:
			return err
		case n >= attempts:
			return fmt.Errorf("%w: %d attempts, the last: %w", ErrConflict, n, err)
		}
		if berr := conflictBackoff(ctx, n); berr != nil {
			return err
		}
		n++
	}
}

// conflictBackoff waits before the attempt after attempt n: a random time
// up to 2^n ms (at most 128 ms), so that writers that keep colliding spread
// out. It returns early with ctx's error when ctx ends.
func conflictBackoff(ctx context.Context, n int) error {
	t := time.NewTimer(time.Duration(rand.Int64N(int64(time.Millisecond) << min(n, 7))))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attempt runs the transaction once. rejected: a higher token is stored
// (highest), nothing was written.
func (f *SQL) attempt(ctx context.Context, st statements, resource string, token uint64, write func(tx *sql.Tx) error) (rejected bool, highest uint64, err error) {
	tx, err := f.DB.BeginTx(ctx, f.TxOptions)
	if err != nil {
		return false, 0, fmt.Errorf("fence: begin: %w", err)
	}
	done := false
	defer func() {
		if !done { // an error, a rejection or a panic in write
			_ = tx.Rollback()
		}
	}()
	if rejected, highest, err = f.admit(ctx, tx, st, resource, token); rejected || err != nil {
		return rejected, highest, err
	}
	if write != nil {
		if err := write(tx); err != nil {
			return false, 0, err
		}
	}
	done = true // Commit ends the transaction, also when it fails
	if err := tx.Commit(); err != nil {
		return false, 0, fmt.Errorf("fence: commit: %w", err)
	}
	return false, 0, nil
}

// admit checks and records token in tx.
func (f *SQL) admit(ctx context.Context, tx *sql.Tx, st statements, resource string, token uint64) (rejected bool, highest uint64, err error) {
	if st.upsert == "" { // MySQL
		var cur int64
		switch err := tx.QueryRowContext(ctx, st.lockRow, resource).Scan(&cur); {
		case errors.Is(err, sql.ErrNoRows):
			return false, 0, errNoRow
		case err != nil:
			return false, 0, fmt.Errorf("fence: check %q: %w", resource, err)
		case uint64(cur) > token:
			return true, uint64(cur), nil
		case uint64(cur) == token:
			return false, 0, nil
		}
		if _, err := tx.ExecContext(ctx, st.raise, int64(token), resource); err != nil {
			return false, 0, fmt.Errorf("fence: record %q: %w", resource, err)
		}
		return false, 0, nil
	}
	res, err := tx.ExecContext(ctx, st.upsert, resource, int64(token))
	if err != nil {
		return false, 0, fmt.Errorf("fence: check %q: %w", resource, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, 0, fmt.Errorf("fence: check %q: %w", resource, err)
	}
	if n > 0 {
		return false, 0, nil
	}
	var cur int64
	if err := tx.QueryRowContext(ctx, st.read, resource).Scan(&cur); err != nil {
		return false, 0, fmt.Errorf("fence: %q refused token %d, reading its highest: %w", resource, token, err)
	}
	return true, uint64(cur), nil
}

func (f *SQL) isConflict(err error) bool {
	if f.Conflict != nil {
		return f.Conflict(err)
	}
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		switch s.SQLState() {
		case "40001", "40P01": // serialization_failure, deadlock_detected
			return true
		}
	}
	return false
}

// Highest returns the highest token admitted for resource (0 if none).
func (f *SQL) Highest(ctx context.Context, resource string) (uint64, error) {
	if err := check(resource, 1, MaxSQLToken); err != nil {
		return 0, err
	}
	st, err := f.statements()
	if err != nil {
		return 0, err
	}
	var v int64
	err = f.DB.QueryRowContext(ctx, st.read, resource).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("fence: read %q: %w", resource, err)
	}
	return uint64(v), nil
}

// Forget deletes the fence row of a resource that is gone, if token is at
// least the row's token (the caller is current: typically it just deleted
// the resource's data in an Exec with the same token); otherwise it returns
// an error wrapping ErrStaleToken and keeps the row. Forgetting a resource
// without a row does nothing. After Forget a stale holder's write is
// admitted as a first write: see the package doc on cleanup.
//
// To expire many rows, run Forget per resource from a job that holds each
// resource's lock; a bare DELETE of rows "whose data is gone" races with a
// holder writing the resource for the first time.
func (f *SQL) Forget(ctx context.Context, resource string, token uint64) error {
	if err := check(resource, token, MaxSQLToken); err != nil {
		return err
	}
	st, err := f.statements()
	if err != nil {
		return err
	}
	res, err := f.DB.ExecContext(ctx, st.forget, resource, int64(token))
	if err != nil {
		return fmt.Errorf("fence: forget %q: %w", resource, err)
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		if err != nil {
			return fmt.Errorf("fence: forget %q: %w", resource, err)
		}
		return nil
	}
	highest, err := f.Highest(ctx, resource)
	if err != nil || highest <= token { // no row (or forgotten meanwhile)
		return err
	}
	if f.OnReject != nil {
		f.OnReject(resource, token, highest)
	}
	return staleError(resource, token, highest)
}
