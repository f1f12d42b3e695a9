package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/raftlock/raftlock/fsm"
)

// snapshot restore sends the backup only once confirmed (a "y" on stdin)
// or with -force; without, it says what a restore does and changes
// nothing. (It used to restore at once.)
func TestRestoreAsksFirst(t *testing.T) {
	var restores atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && r.URL.Path == "/v1/admin/snapshot" {
			restores.Add(1)
		}
		w.Write([]byte("{}"))
	}))
	defer srv.Close()
	var backup bytes.Buffer
	if err := fsm.New(nil).WriteSnapshot(&backup); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "backup.snap")
	if err := os.WriteFile(file, backup.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		stdin    string
		args     []string
		code     int
		restores int32
	}{
		{"", []string{"snapshot", "restore", file}, exitError, 0},
		{"n\n", []string{"snapshot", "restore", file}, exitError, 0},
		{"y\n", []string{"snapshot", "restore", file}, 0, 1},
		{"", []string{"snapshot", "restore", "-force", file}, 0, 1},
		{"", []string{"snapshot", "restore", file, "-force"}, 0, 1},
	} {
		restores.Store(0)
		_, errOut, code := runLocal(srv.URL, tc.stdin, tc.args...)
		if code != tc.code || restores.Load() != tc.restores {
			t.Errorf("stdin %q, raftlock %s: exit %d after %d restores, want %d after %d\n%s", tc.stdin, strings.Join(tc.args, " "), code, restores.Load(), tc.code, tc.restores, errOut)
		}
		for _, want := range []string{"every session now in the cluster ends", "the backup's 0 sessions come back", "tokens never go back"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("stdin %q, raftlock %s: the warning lacks %q:\n%s", tc.stdin, strings.Join(tc.args, " "), want, errOut)
			}
		}
	}
}
