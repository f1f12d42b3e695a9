//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestMigrateLogStoreCommandUsage: bad arguments are usage errors that touch
// nothing.
func TestMigrateLogStoreCommandUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "-data-dir is required"},
		{[]string{"-data-dir", dir, "-to", "lsm"}, `-to "lsm"`},
		{[]string{"-data-dir", dir, "-from", "zip"}, `-from "zip"`},
		{[]string{"-data-dir", dir, "-from", "wal", "-to", "wal"}, "both"},
		{[]string{"-data-dir", dir, "extra"}, "unexpected"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"migrate-log-store"}, tc.args...), envOf(nil), &out)
		if !errors.Is(err, errUsage) || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%q: err %v, output %q; want a usage error mentioning %q", tc.args, err, out.String(), tc.want)
		}
	}
	// A data dir holding no bolt store: an error, not a new store.
	err := run(context.Background(), []string{"migrate-log-store", "-data-dir", dir}, envOf(nil), &bytes.Buffer{})
	if err == nil || errors.Is(err, errUsage) {
		t.Errorf("migrating an empty data dir: %v, want an error saying it holds no bolt store", err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-id", "a", "-data-dir", dir, "-http-no-auth", "-log-store", "lsm"}, envOf(nil), &out); !errors.Is(err, errUsage) || !strings.Contains(out.String(), "-log-store") {
		t.Errorf("-log-store lsm: %v %q", err, out.String())
	}
}
