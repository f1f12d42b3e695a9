package fencesuite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/raftlock/raftlock/fence"
)

// SQLStore is the suite's Store over a fence.SQL: the protected data are
// two tables, <Prefix>_data (the current value and a write count per
// resource) and <Prefix>_log (one row per write, keyed by resource and
// count). Write reads the count and writes count+1 — a read-modify-write
// that loses updates, or fails on the log's key, if the fence ever lets two
// writers of one resource overlap or lets a writer read old data.
type SQLStore struct {
	Fence  *fence.SQL
	Prefix string // table name prefix, e.g. "suite"
}

func (s *SQLStore) q(query string) string { return s.Fence.Dialect.Bind(query) }

// CreateTables creates the fence table and the data tables (dropping data
// tables of an earlier run).
func (s *SQLStore) CreateTables(ctx context.Context) error {
	if err := s.Fence.CreateTable(ctx); err != nil {
		return err
	}
	name, value := "TEXT", "TEXT"
	switch s.Fence.Dialect {
	case fence.PostgreSQL:
		name = `TEXT COLLATE "C"`
	case fence.MySQL:
		name, value = "VARBINARY(1024)", "VARBINARY(2048)"
	}
	for _, q := range []string{
		`DROP TABLE IF EXISTS ` + s.Prefix + `_data`,
		`DROP TABLE IF EXISTS ` + s.Prefix + `_log`,
		`CREATE TABLE ` + s.Prefix + `_data (resource ` + name + ` NOT NULL PRIMARY KEY, cur ` + value + ` NOT NULL, n BIGINT NOT NULL)`,
		`CREATE TABLE ` + s.Prefix + `_log (resource ` + name + ` NOT NULL, seq BIGINT NOT NULL, val ` + value + ` NOT NULL, PRIMARY KEY (resource, seq))`,
	} {
		if _, err := s.Fence.DB.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// Write implements Store.
func (s *SQLStore) Write(ctx context.Context, resource string, token uint64, value string) error {
	return s.Fence.Exec(ctx, resource, token, func(tx *sql.Tx) error {
		var n int64
		err := tx.QueryRowContext(ctx, s.q(`SELECT n FROM `+s.Prefix+`_data WHERE resource = ?`), resource).Scan(&n)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.ExecContext(ctx, s.q(`INSERT INTO `+s.Prefix+`_data (resource, cur, n) VALUES (?, ?, 1)`), resource, value)
		case err == nil:
			_, err = tx.ExecContext(ctx, s.q(`UPDATE `+s.Prefix+`_data SET cur = ?, n = ? WHERE resource = ?`), value, n+1, resource)
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, s.q(`INSERT INTO `+s.Prefix+`_log (resource, seq, val) VALUES (?, ?, ?)`), resource, n+1, value)
		return err
	})
}

// State implements Store.
func (s *SQLStore) State(ctx context.Context, resource string) (string, []string, error) {
	var cur string
	err := s.Fence.DB.QueryRowContext(ctx, s.q(`SELECT cur FROM `+s.Prefix+`_data WHERE resource = ?`), resource).Scan(&cur)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", nil, err
	}
	rows, err := s.Fence.DB.QueryContext(ctx, s.q(`SELECT val FROM `+s.Prefix+`_log WHERE resource = ? ORDER BY seq`), resource)
	if err != nil {
		return "", nil, err
	}
	defer rows.Close()
	var log []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return "", nil, err
		}
		log = append(log, v)
	}
	return cur, log, rows.Err()
}

// Highest implements Store.
func (s *SQLStore) Highest(ctx context.Context, resource string) (uint64, error) {
	return s.Fence.Highest(ctx, resource)
}

// Forget implements Store.
func (s *SQLStore) Forget(ctx context.Context, resource string, token uint64) error {
	return s.Fence.Forget(ctx, resource, token)
}
