package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"regexp"
)

// SQL is a fence kept in a database table, one row per resource with the
// highest token admitted. Exec performs the fence check and the protected
// write in one transaction: either both commit or neither does, so a stale
// holder can never write, even if it was paused between its check and its
// write.
//
// The check is a conditional upsert:
//
//	INSERT INTO <table> (resource, token) VALUES (?, ?)
//	ON CONFLICT (resource) DO UPDATE SET token = excluded.token
//	WHERE excluded.token >= <table>.token
//
// which affects no row when a higher token is already stored. It runs first
// in the transaction, so it also locks the fence row: concurrent writers of
// the same resource are serialized until commit.
//
// SQLite (3.24+) and PostgreSQL (9.5+) accept this statement. For SQLite,
// open the database so that transactions take the write lock at BEGIN (for
// modernc.org/sqlite: "_txlock=immediate" in the DSN), otherwise concurrent
// writers may fail with SQLITE_BUSY. For PostgreSQL set Placeholder to
// PostgreSQL; any isolation level works, because the row lock taken by the
// upsert orders writers of one resource.
//
// PostgreSQL:
//
//	f := &fence.SQL{DB: pg, Placeholder: fence.PostgreSQL}
//	err := f.CreateTable(ctx) // resource TEXT PRIMARY KEY, token BIGINT NOT NULL
//	err = f.Exec(lease.Context(), "invoice:842", uint64(lease.Token()), func(tx *sql.Tx) error {
//		_, err := tx.Exec(`UPDATE invoices SET state = 'final' WHERE id = $1`, 842)
//		return err
//	})
//
// The zero value is not usable: set DB (and Table, default "raftlock_fence").
type SQL struct {
	DB          *sql.DB
	Table       string      // default "raftlock_fence"; letters, digits, _ and . only
	Placeholder Placeholder // default QuestionMark (SQLite, MySQL-style drivers)
	TxOptions   *sql.TxOptions
	// OnReject, if set, is called for every refused stale write (metrics,
	// logging); highest is 0 if it could not be read.
	OnReject func(resource string, token, highest uint64)
}

// Placeholder is the bind-parameter style of the driver.
type Placeholder int

const (
	// QuestionMark: ?, ? (SQLite, database/sql default for many drivers).
	QuestionMark Placeholder = iota
	// Dollar: $1, $2 (PostgreSQL).
	Dollar
)

// PostgreSQL is an alias of Dollar, for readability.
const PostgreSQL = Dollar

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

func (f *SQL) table() (string, error) {
	t := f.Table
	if t == "" {
		t = "raftlock_fence"
	}
	if !tableName.MatchString(t) {
		return "", fmt.Errorf("%w: table name %q", ErrInvalid, t)
	}
	return t, nil
}

// CreateTable creates the fence table if it does not exist.
func (f *SQL) CreateTable(ctx context.Context) error {
	t, err := f.table()
	if err != nil {
		return err
	}
	_, err = f.DB.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+t+` (
	resource TEXT PRIMARY KEY,
	token    BIGINT NOT NULL
)`)
	if err != nil {
		return fmt.Errorf("fence: create table %s: %w", t, err)
	}
	return nil
}

// Exec begins a transaction, admits token for resource (or returns an error
// wrapping ErrStaleToken without calling write), calls write with the
// transaction, and commits. If write returns an error, or ctx ends, the
// transaction is rolled back — fence update included.
//
// Pass the lease's context as ctx: if the lease is lost before commit, the
// transaction is abandoned (the fence would still protect the data, but
// stopping early avoids wasted work).
func (f *SQL) Exec(ctx context.Context, resource string, token uint64, write func(tx *sql.Tx) error) (err error) {
	if err := check(resource, token); err != nil {
		return err
	}
	if token > math.MaxInt64 {
		return fmt.Errorf("%w: token %d beyond the int64 range", ErrInvalid, token)
	}
	t, err := f.table()
	if err != nil {
		return err
	}
	tx, err := f.DB.BeginTx(ctx, f.TxOptions)
	if err != nil {
		return fmt.Errorf("fence: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := f.admit(ctx, tx, t, resource, token); err != nil {
		return err
	}
	if write != nil {
		if err := write(tx); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fence: commit: %w", err)
	}
	return nil
}

func (f *SQL) admit(ctx context.Context, tx *sql.Tx, table, resource string, token uint64) error {
	p1, p2 := "?", "?"
	if f.Placeholder == Dollar {
		p1, p2 = "$1", "$2"
	}
	q := `INSERT INTO ` + table + ` (resource, token) VALUES (` + p1 + `, ` + p2 + `)
ON CONFLICT (resource) DO UPDATE SET token = excluded.token
WHERE excluded.token >= ` + table + `.token`
	res, err := tx.ExecContext(ctx, q, resource, int64(token))
	if err != nil {
		return fmt.Errorf("fence: check %q: %w", resource, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("fence: check %q: %w", resource, err)
	}
	if n == 0 {
		var highest int64
		_ = tx.QueryRowContext(ctx, `SELECT token FROM `+table+` WHERE resource = `+p1, resource).Scan(&highest)
		if f.OnReject != nil {
			f.OnReject(resource, token, uint64(highest))
		}
		return fmt.Errorf("%w: resource %q token %d < %d", ErrStaleToken, resource, token, highest)
	}
	return nil
}

// Highest returns the highest token admitted for resource (0 if none).
func (f *SQL) Highest(ctx context.Context, resource string) (uint64, error) {
	t, err := f.table()
	if err != nil {
		return 0, err
	}
	p := "?"
	if f.Placeholder == Dollar {
		p = "$1"
	}
	var v int64
	err = f.DB.QueryRowContext(ctx, `SELECT token FROM `+t+` WHERE resource = `+p, resource).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("fence: read %q: %w", resource, err)
	}
	return uint64(v), nil
}
