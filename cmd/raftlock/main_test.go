package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// childEnv makes the test binary act as the command raftlock lock runs
// (child below) instead of running the tests.
const childEnv = "RAFTLOCK_CLI_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(child(os.Args[1:]))
	}
	os.Setenv(childEnv, "1") // for the commands the tests run
	goleak.VerifyTestMain(m)
}

// child is a command to run under a lock:
//
//	env EXIT          print the lock's variables, exit with EXIT
//	hold FILE [ignore-term]   write FILE.started; on SIGTERM write the time
//	                  to FILE.term and exit 143 (or, with ignore-term, go
//	                  on); exit 0 when FILE.stop appears
func child(args []string) int {
	switch {
	case len(args) == 2 && args[0] == "env":
		fmt.Printf("%s=%s\n%s=%s\n", envLockName, os.Getenv(envLockName), envLockToken, os.Getenv(envLockToken))
		code, _ := strconv.Atoi(args[1])
		return code
	case len(args) >= 2 && args[0] == "hold":
		file := args[1]
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		os.WriteFile(file+".started", []byte(os.Getenv(envLockToken)), 0o644)
		tick := time.NewTicker(20 * time.Millisecond)
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
			select {
			case <-term:
				os.WriteFile(file+".term", []byte(strconv.FormatInt(time.Now().UnixNano(), 10)), 0o644)
				if len(args) < 3 || args[2] != "ignore-term" {
					return 143
				}
			case <-tick.C:
				if _, err := os.Stat(file + ".stop"); err == nil {
					return 0
				}
			}
		}
		return 99
	}
	fmt.Fprintln(os.Stderr, "child: bad arguments", args)
	return 98
}
