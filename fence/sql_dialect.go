package fence

import (
	"fmt"
	"regexp"
	"strings"
)

// Dialect is the SQL dialect of the fence's statements. It is chosen by the
// caller, never guessed from the driver. With the wrong dialect the
// statements fail with a syntax error: nothing is admitted.
type Dialect int

const (
	// SQLite (3.24+): `?` parameters, INSERT … ON CONFLICT … DO UPDATE …
	// WHERE. The zero value.
	SQLite Dialect = iota
	// PostgreSQL (9.5+): `$n` parameters, the same conditional upsert;
	// resource TEXT COLLATE "C".
	PostgreSQL
	// MySQL (5.7+, 8) and MariaDB (10.3+), InnoDB: `?` parameters, the row
	// read with SELECT … FOR UPDATE, compared, then updated; resource
	// VARBINARY, so names compare byte for byte (the default collations
	// ignore case and trailing spaces).
	MySQL
	// MariaDB is MySQL.
	MariaDB = MySQL
)

// String names the dialect.
func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "SQLite"
	case PostgreSQL:
		return "PostgreSQL"
	case MySQL:
		return "MySQL"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// Bind rewrites the ? parameters of query into the dialect's style: $1,
// $2, … for PostgreSQL, unchanged for the others. It is a plain text
// substitution (a ? inside a string literal is rewritten too), for queries
// written once for several dialects, like those that go with the fence.
func (d Dialect) Bind(query string) string {
	if d != PostgreSQL {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r != '?' {
			b.WriteRune(r)
			continue
		}
		n++
		fmt.Fprintf(&b, "$%d", n)
	}
	return b.String()
}

// statements are the fence's SQL for one dialect and table. Parameters:
// the resource first, then the token (an int64); raise takes the token
// first.
type statements struct {
	create string
	// upsert (SQLite, PostgreSQL) records the token if not older: one row
	// affected if admitted, none if a higher token is stored.
	upsert string
	// lockRow (MySQL) reads the stored token, locking the row; ensureRow
	// (MySQL, outside the transaction) creates a row with token 0 if there
	// is none; raise (MySQL) stores a higher token.
	lockRow, ensureRow, raise string
	read                      string // the stored token
	// forget deletes the row if its token is not above the parameter.
	forget string
}

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// DefaultTable is the fence table's name when SQL.Table is empty.
const DefaultTable = "raftlock_fence"

// sqlStatements builds the statements of dialect d for table t: a pure
// function of its arguments (table-tested for every dialect).
func sqlStatements(d Dialect, t string) (statements, error) {
	if t == "" {
		t = DefaultTable
	}
	if !tableName.MatchString(t) {
		return statements{}, fmt.Errorf("%w: table name %q (letters, digits, _ and one optional schema dot)", ErrInvalid, t)
	}
	switch d {
	case SQLite:
		return statements{
			create: `CREATE TABLE IF NOT EXISTS ` + t + ` (resource TEXT PRIMARY KEY, token BIGINT NOT NULL)`,
			upsert: `INSERT INTO ` + t + ` AS f (resource, token) VALUES (?, ?) ON CONFLICT (resource) DO UPDATE SET token = excluded.token WHERE f.token <= excluded.token`,
			read:   `SELECT token FROM ` + t + ` WHERE resource = ?`,
			forget: `DELETE FROM ` + t + ` WHERE resource = ? AND token <= ?`,
		}, nil
	case PostgreSQL:
		return statements{
			create: `CREATE TABLE IF NOT EXISTS ` + t + ` (resource TEXT COLLATE "C" PRIMARY KEY, token BIGINT NOT NULL)`,
			upsert: `INSERT INTO ` + t + ` AS f (resource, token) VALUES ($1, $2) ON CONFLICT (resource) DO UPDATE SET token = excluded.token WHERE f.token <= excluded.token`,
			read:   `SELECT token FROM ` + t + ` WHERE resource = $1`,
			forget: `DELETE FROM ` + t + ` WHERE resource = $1 AND token <= $2`,
		}, nil
	case MySQL:
		return statements{
			create:    `CREATE TABLE IF NOT EXISTS ` + t + ` (resource VARBINARY(1024) NOT NULL PRIMARY KEY, token BIGINT NOT NULL) ENGINE=InnoDB`,
			lockRow:   `SELECT token FROM ` + t + ` WHERE resource = ? FOR UPDATE`,
			ensureRow: `INSERT INTO ` + t + ` (resource, token) VALUES (?, 0) ON DUPLICATE KEY UPDATE token = token`,
			raise:     `UPDATE ` + t + ` SET token = ? WHERE resource = ?`,
			read:      `SELECT token FROM ` + t + ` WHERE resource = ?`,
			forget:    `DELETE FROM ` + t + ` WHERE resource = ? AND token <= ?`,
		}, nil
	}
	return statements{}, fmt.Errorf("%w: unknown SQL dialect %v", ErrInvalid, d)
}
