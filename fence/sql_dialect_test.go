package fence

import (
	"errors"
	"testing"
)

// The statements of every dialect, as generated (PostgreSQL and MySQL also
// run against real servers in the nested module fence/fencetest).
func TestSQLStatements(t *testing.T) {
	for _, tc := range []struct {
		d     Dialect
		table string
		want  statements
	}{
		{SQLite, "", statements{
			create: `CREATE TABLE IF NOT EXISTS raftlock_fence (resource TEXT PRIMARY KEY, token BIGINT NOT NULL)`,
			upsert: `INSERT INTO raftlock_fence AS f (resource, token) VALUES (?, ?) ON CONFLICT (resource) DO UPDATE SET token = excluded.token WHERE f.token <= excluded.token`,
			read:   `SELECT token FROM raftlock_fence WHERE resource = ?`,
			forget: `DELETE FROM raftlock_fence WHERE resource = ? AND token <= ?`,
		}},
		{PostgreSQL, "app.fence", statements{
			create: `CREATE TABLE IF NOT EXISTS app.fence (resource TEXT COLLATE "C" PRIMARY KEY, token BIGINT NOT NULL)`,
			upsert: `INSERT INTO app.fence AS f (resource, token) VALUES ($1, $2) ON CONFLICT (resource) DO UPDATE SET token = excluded.token WHERE f.token <= excluded.token`,
			read:   `SELECT token FROM app.fence WHERE resource = $1`,
			forget: `DELETE FROM app.fence WHERE resource = $1 AND token <= $2`,
		}},
		{MySQL, "fence", statements{
			create:    "CREATE TABLE IF NOT EXISTS fence (resource VARBINARY(1024) NOT NULL PRIMARY KEY, token BIGINT NOT NULL) ENGINE=InnoDB",
			lockRow:   `SELECT token FROM fence WHERE resource = ? FOR UPDATE`,
			ensureRow: `INSERT INTO fence (resource, token) VALUES (?, 0) ON DUPLICATE KEY UPDATE token = token`,
			raise:     `UPDATE fence SET token = ? WHERE resource = ?`,
			read:      `SELECT token FROM fence WHERE resource = ?`,
			forget:    `DELETE FROM fence WHERE resource = ? AND token <= ?`,
		}},
	} {
		got, err := sqlStatements(tc.d, tc.table)
		if err != nil {
			t.Fatalf("%v: %v", tc.d, err)
		}
		if got != tc.want {
			t.Errorf("%v:\n got %+v\nwant %+v", tc.d, got, tc.want)
		}
	}
	if MariaDB != MySQL {
		t.Error("MariaDB is not MySQL")
	}
	for _, bad := range []struct {
		d     Dialect
		table string
	}{
		{Dialect(9), ""}, {SQLite, "x; DROP TABLE y"}, {PostgreSQL, "a.b.c"}, {MySQL, "1abc"}, {SQLite, `"quoted"`},
	} {
		if _, err := sqlStatements(bad.d, bad.table); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v %q: %v, want ErrInvalid", bad.d, bad.table, err)
		}
	}
}

func TestDialectBind(t *testing.T) {
	q := `UPDATE t SET a = ?, b = ? WHERE id = ?`
	if got := PostgreSQL.Bind(q); got != `UPDATE t SET a = $1, b = $2 WHERE id = $3` {
		t.Errorf("PostgreSQL: %s", got)
	}
	for _, d := range []Dialect{SQLite, MySQL} {
		if got := d.Bind(q); got != q {
			t.Errorf("%v: %s", d, got)
		}
	}
}
