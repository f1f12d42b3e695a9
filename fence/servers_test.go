package fence_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// raceFlag is "-race" when this test binary was built with the race
// detector (race_test.go), so the store tests run the same way.
var raceFlag string

// TestStoreFencesOnServers runs the fence tests against real PostgreSQL,
// MariaDB, Redis and Azurite (Azure Blob Storage's emulator) servers, and
// the fencedsql example on PostgreSQL. They
// live in nested modules (fence/fencetest, examples/fencedsql), so
// that their MySQL and Redis clients stay out of raftlock's go.mod (pgx is
// there for the demo's -postgres); this test runs
// them with `go test` when the servers' addresses are set, as
// fence/fencetest/servers.sh does, and fails if any of their tests failed or skipped.
func TestStoreFencesOnServers(t *testing.T) {
	vars := []string{"RAFTLOCK_TEST_POSTGRES", "RAFTLOCK_TEST_MYSQL", "RAFTLOCK_TEST_REDIS", "RAFTLOCK_TEST_AZURITE"}
	var missing []string
	for _, v := range vars {
		if os.Getenv(v) == "" {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		msg := "fence tests against PostgreSQL, MariaDB, Redis and Azurite need " + strings.Join(missing, ", ") +
			": run `bash fence/fencetest/servers.sh` from the repository root (it starts the servers on loopback, runs this test, and stops them)"
		if os.Getenv("RAFTLOCK_FENCE_SERVERS") == "required" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to run the nested modules' tests: %v", err)
	}
	timeout := 10 * time.Minute
	if d, ok := t.Deadline(); ok {
		timeout = time.Until(d) - 10*time.Second
	}
	for _, dir := range []string{"fencetest", "../examples/fencedsql"} {
		args := []string{"test", "-count=1", "-v", "-timeout", timeout.Round(time.Second).String()}
		if raceFlag != "" {
			args = append(args, raceFlag)
		}
		cmd := exec.CommandContext(t.Context(), goCmd, append(args, "./...")...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "RAFTLOCK_FENCE_SERVERS=required")
		out, err := cmd.CombinedOutput()
		t.Logf("go %s (in %s):\n%s", strings.Join(args, " "), dir, out)
		if err != nil {
			t.Errorf("the tests in %s failed: %v", dir, err)
		}
		if strings.Contains(string(out), "--- SKIP") {
			t.Errorf("tests in %s were skipped, with every server set", dir)
		}
	}
}
