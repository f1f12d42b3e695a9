package fencetest

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/fence/internal/fencesuite"
)

// openDB opens the database whose address is in the environment
// variable env (see server) and checks that it answers.
func openDB(t *testing.T, driver, env string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, server(t, env))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatalf("%s (%s): %v", env, driver, err)
	}
	return db
}

// The suite on PostgreSQL at each isolation level. Under REPEATABLE READ
// and SERIALIZABLE racing writers of one resource meet serialization
// failures (SQLSTATE 40001), which Exec retries.
func TestPostgreSQL(t *testing.T) {
	db := openDB(t, "pgx", "RAFTLOCK_TEST_POSTGRES")
	var version string
	if err := db.QueryRow(`SHOW server_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL %s", version)
	for _, iso := range isolations {
		t.Run(iso.name, func(t *testing.T) {
			var retried atomic.Int64
			f := &fence.SQL{DB: db, Dialect: fence.PostgreSQL, Table: "fence_" + iso.name,
				TxOptions: &sql.TxOptions{Isolation: iso.level}, Attempts: 10,
				Conflict: func(err error) bool {
					var e *pgconn.PgError
					if errors.As(err, &e) && (e.Code == "40001" || e.Code == "40P01") {
						retried.Add(1)
						return true
					}
					return false
				}}
			defer func() { t.Logf("%s: %d serialization failures retried", iso.name, retried.Load()) }()
			s := &fencesuite.SQLStore{Fence: f, Prefix: "suite_" + iso.name}
			if err := s.CreateTables(context.Background()); err != nil {
				t.Fatal(err)
			}
			fencesuite.Run(t, s, fencesuite.Config{MaxToken: fence.MaxSQLToken})
		})
	}
}

var isolations = []struct {
	name  string
	level sql.IsolationLevel
}{
	{"read_committed", sql.LevelReadCommitted},
	{"repeatable_read", sql.LevelRepeatableRead},
	{"serializable", sql.LevelSerializable},
}
