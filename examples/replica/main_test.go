package main

import (
	"encoding/json"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// replicaArgsEnv makes the test binary run as the replica program with these
// arguments (JSON list): the cluster test starts real replica processes
// without building a separate binary.
const replicaArgsEnv = "RAFTLOCK_REPLICA_TEST_ARGS"

func TestMain(m *testing.M) {
	if v := os.Getenv(replicaArgsEnv); v != "" {
		var args []string
		if err := json.Unmarshal([]byte(v), &args); err != nil {
			panic(err)
		}
		os.Args = append(os.Args[:1], args...)
		main() // exits
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
