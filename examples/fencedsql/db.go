package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/raftlock/raftlock/fence"
)

// store is the example's database: the invoices table and its fence.
type store struct {
	db    *sql.DB
	fence *fence.SQL
}

// openStore opens PostgreSQL if pgDSN is set, else the SQLite file at path.
// _txlock=immediate: SQLite transactions take the write lock at BEGIN, so
// concurrent writers queue (busy_timeout) instead of failing with
// SQLITE_BUSY.
func openStore(ctx context.Context, pgDSN, path string) (*store, error) {
	driver, dsn, dialect := "sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)", fence.SQLite
	if pgDSN != "" {
		driver, dsn, dialect = "pgx", pgDSN, fence.PostgreSQL
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", dialect, err)
	}
	return &store{db: db, fence: &fence.SQL{DB: db, Dialect: dialect}}, nil // table raftlock_fence
}

func (s *store) q(query string) string { return s.fence.Dialect.Bind(query) }

// errFenceAhead: the fence already knows the invoice from an earlier run.
var errFenceAhead = errors.New("the fence is ahead of this cluster")

// prepare creates the tables and resets the invoice. If the fence already
// holds a token for the invoice (an earlier run on the same database), it
// stops with errFenceAhead unless resetFence: this run's cluster is new, and
// its tokens are above the old one's only within the bound of the
// cross-cluster guarantee (a clock not behind, the floor committed before
// the first grant) — the fence cannot tell this cluster's holders from the
// old one's, so the example does not rely on it.
func (s *store) prepare(ctx context.Context, resetFence bool) (reset uint64, err error) {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS invoices (
	id         TEXT PRIMARY KEY,
	amount     BIGINT NOT NULL,
	written_by TEXT NOT NULL,
	token      BIGINT NOT NULL)`); err != nil {
		return 0, err
	}
	if err := s.fence.CreateTable(ctx); err != nil {
		return 0, err
	}
	highest, err := s.fence.Highest(ctx, invoice)
	if err != nil {
		return 0, err
	}
	if highest > 0 {
		if !resetFence {
			return 0, fmt.Errorf("%w: it holds token %d for %s from an earlier run, and this run's "+
				"new in-memory cluster is above it only within the bound of the cross-cluster token "+
				"guarantee (the fence cannot tell this cluster's holders from the old one's). Use a fresh "+
				"database, or pass -reset-fence if no holder of the earlier cluster can still write", errFenceAhead, highest, invoice)
		}
		// Safe here only because the earlier cluster lived in an earlier
		// process of this example and is gone with its holders.
		if err := s.fence.Forget(ctx, invoice, highest); err != nil {
			return 0, err
		}
	}
	_, err = s.db.ExecContext(ctx, s.q(`INSERT INTO invoices VALUES (?, 0, '', 0) ON CONFLICT (id) DO UPDATE SET amount = 0, written_by = '', token = 0`), invoice)
	return highest, err
}

// write is the fenced update: the fence check and the update in one
// transaction.
func (s *store) write(ctx context.Context, token uint64, who string) error {
	return s.fence.Exec(ctx, invoice, token, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.q(`UPDATE invoices SET amount = amount + 1, written_by = ?, token = ? WHERE id = ?`), who, int64(token), invoice)
		return err
	})
}

// invoiceRow reads the invoice.
func (s *store) invoiceRow(ctx context.Context) (amount int64, by string, token uint64, err error) {
	var tok int64
	err = s.db.QueryRowContext(ctx, s.q(`SELECT amount, written_by, token FROM invoices WHERE id = ?`), invoice).Scan(&amount, &by, &tok)
	return amount, by, uint64(tok), err
}
