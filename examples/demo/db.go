//go:build unix

package main

import (
	"context"
	"database/sql"
	"fmt"

	_ "modernc.org/sqlite"

	"github.com/raftlock/raftlock/lockapi/fence"
)

// The shared database: one SQLite file that every replica process writes
// into through the SQL fence (WAL mode, a busy timeout, and transactions that
// take the write lock at BEGIN).
//
//	documents     the published artifact of each document (latest wins)
//	publications  every accepted write, in commit order
//	rejections    every write the fence refused
//	singleton_runs what the singleton job wrote, in commit order
//	raftlock_fence the fence: the highest token admitted per resource
func openDB(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(4)
	return db, nil
}

const schema = `
CREATE TABLE IF NOT EXISTS documents (
	id      TEXT PRIMARY KEY,
	content TEXT NOT NULL,
	token   INTEGER NOT NULL,
	replica TEXT NOT NULL,
	version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS publications (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	doc     TEXT NOT NULL,
	token   INTEGER NOT NULL,
	replica TEXT NOT NULL,
	at_ns   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rejections (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	doc     TEXT NOT NULL,
	token   INTEGER NOT NULL,
	highest INTEGER NOT NULL,
	replica TEXT NOT NULL,
	at_ns   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS singleton_runs (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	token   INTEGER NOT NULL,
	replica TEXT NOT NULL,
	at_ns   INTEGER NOT NULL
);`

// createDB creates the database file and its tables (the parent does it once,
// before the replicas start).
func createDB(ctx context.Context, path string) error {
	db, err := openDB(path)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	return (&fence.SQL{DB: db}).CreateTable(ctx)
}
