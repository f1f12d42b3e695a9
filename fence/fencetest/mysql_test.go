package fencetest

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/fence/internal/fencesuite"
)

// mysqlConflict: InnoDB's deadlock (1213, SQLSTATE 40001) is worth a retry.
func mysqlConflict(err error) bool {
	var e *mysql.MySQLError
	return errors.As(err, &e) && e.Number == 1213
}

// The suite on MariaDB/MySQL at each isolation level.
func TestMySQL(t *testing.T) {
	db := openDB(t, "mysql", "RAFTLOCK_TEST_MYSQL")
	var version string
	if err := db.QueryRow(`SELECT VERSION()`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	t.Logf("MySQL/MariaDB %s", version)
	for _, iso := range isolations {
		t.Run(iso.name, func(t *testing.T) {
			f := &fence.SQL{DB: db, Dialect: fence.MySQL, Table: "fence_" + iso.name,
				TxOptions: &sql.TxOptions{Isolation: iso.level}, Conflict: mysqlConflict, Attempts: 10}
			s := &fencesuite.SQLStore{Fence: f, Prefix: "suite_" + iso.name}
			if err := s.CreateTables(context.Background()); err != nil {
				t.Fatal(err)
			}
			fencesuite.Run(t, s, fencesuite.Config{MaxToken: fence.MaxSQLToken})
		})
	}
}
