//go:build unix

package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/raftlock/raftlock/fence"
)

// The shared database that every replica process writes into through the
// SQL fence: a SQLite file (the default: WAL mode, a busy timeout, and
// transactions that take the write lock at BEGIN) or, with -postgres, a
// schema of its own in a PostgreSQL database (made at the start, dropped at
// the end unless -keep).
//
//	documents      the published artifact of each document (latest wins)
//	publications   every accepted write, in commit order
//	rejections     every write the fence refused
//	singleton_runs what the singleton job wrote, in commit order
//	raftlock_fence the fence: the highest token admitted per resource
type store struct {
	Path     string `json:"path,omitempty"`     // SQLite file
	Postgres string `json:"postgres,omitempty"` // PostgreSQL URL, search_path set to Schema
	Schema   string `json:"schema,omitempty"`   // PostgreSQL: the demo's own schema
}

func (s store) postgres() bool { return s.Postgres != "" }

// open opens the database (a pool of a few connections).
func (s store) open() (*sql.DB, error) {
	var db *sql.DB
	var err error
	if s.postgres() {
		db, err = sql.Open("pgx", s.Postgres)
	} else {
		db, err = sql.Open("sqlite", "file:"+s.Path+"?_txlock=immediate&_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	}
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(4)
	return db, nil
}

// fence is the SQL fence of the database, in its dialect.
func (s store) fence(db *sql.DB) *fence.SQL {
	if s.postgres() {
		return &fence.SQL{DB: db, Dialect: fence.PostgreSQL}
	}
	return &fence.SQL{DB: db}
}

// q writes a query with ? placeholders in the database's dialect.
func (s store) q(query string) string {
	if !s.postgres() {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// newPostgresStore makes a schema of its own for this run in the database
// at base (a PostgreSQL URL) and returns the store whose connections use
// it.
func newPostgresStore(ctx context.Context, base string) (store, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return store{}, fmt.Errorf("-postgres %q: want a URL postgres://user@host:port/db?…", base)
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	schema := "raftlock_demo_" + hex.EncodeToString(rnd[:])
	db, err := sql.Open("pgx", base)
	if err != nil {
		return store{}, err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		return store{}, fmt.Errorf("PostgreSQL: create schema %s: %w", schema, err)
	}
	qv := u.Query()
	qv.Set("search_path", schema)
	u.RawQuery = qv.Encode()
	return store{Postgres: u.String(), Schema: schema}, nil
}

// drop removes what the run made in PostgreSQL (its schema).
func (s store) drop(ctx context.Context) error {
	if !s.postgres() {
		return nil
	}
	db, err := s.open()
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "DROP SCHEMA "+s.Schema+" CASCADE")
	return err
}

const schemaSQLite = `
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

// The same tables in PostgreSQL (64-bit integers, identity sequences).
const schemaPostgres = `
CREATE TABLE IF NOT EXISTS documents (
	id      TEXT PRIMARY KEY,
	content TEXT NOT NULL,
	token   BIGINT NOT NULL,
	replica TEXT NOT NULL,
	version BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS publications (
	seq     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	doc     TEXT NOT NULL,
	token   BIGINT NOT NULL,
	replica TEXT NOT NULL,
	at_ns   BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS rejections (
	seq     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	doc     TEXT NOT NULL,
	token   BIGINT NOT NULL,
	highest BIGINT NOT NULL,
	replica TEXT NOT NULL,
	at_ns   BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS singleton_runs (
	seq     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	token   BIGINT NOT NULL,
	replica TEXT NOT NULL,
	at_ns   BIGINT NOT NULL
);`

// create creates the tables and the fence's table (the parent does it once,
// before the replicas start).
func (s store) create(ctx context.Context) error {
	db, err := s.open()
	if err != nil {
		return err
	}
	defer db.Close()
	schema := schemaSQLite
	if s.postgres() {
		schema = schemaPostgres
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	return s.fence(db).CreateTable(ctx)
}
