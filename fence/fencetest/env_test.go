package fencetest

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server returns the address of a test server from the environment
// variable name, or skips the test saying how to get one — or fails, when
// RAFTLOCK_FENCE_SERVERS=required (set by servers.sh and CI): there a
// missing server is a broken run, not a reason to skip.
func server(t *testing.T, name string) string {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		return v
	}
	msg := name + " is not set: run the fence tests against real servers with `bash fence/fencetest/servers.sh` (from the repository root)"
	if os.Getenv("RAFTLOCK_FENCE_SERVERS") == "required" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
