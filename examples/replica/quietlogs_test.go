//go:build linux

package main

import (
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/testing/replicaproc"
)

// Normal operation logs nothing an operator must act on (issue 16): no
// WARN or ERROR when a one-replica cluster starts, no ERROR when a replica
// leaves gracefully (-leave-on-stop, SIGTERM), none after a replica was
// paused past the heartbeat timeout and resumed ("broken pipe").
func TestQuietLogs(t *testing.T) {
	loud := regexp.MustCompile(`(?m)^.*level=(WARN|ERROR).*$`)
	errors := regexp.MustCompile(`(?m)^.*level=ERROR.*$`)

	one := replicaproc.Start(t, 1)
	time.Sleep(2 * time.Second)
	if l := loud.FindAllString(one[0].Log(), -1); len(l) > 0 {
		t.Errorf("a one-replica start logged:\n%v", l)
	}
	one[0].Kill()

	reps := replicaproc.Start(t, 3, "-leave-on-stop")
	paused := replicaproc.Leader(t, reps) // deposed while paused
	paused.Freeze(t)
	time.Sleep(3 * time.Second)
	paused.Signal(syscall.SIGCONT)
	time.Sleep(3 * time.Second)
	leaving := replicaproc.Leader(t, reps) // hands its leadership over as it leaves
	leaving.Signal(syscall.SIGTERM)
	replicaproc.WaitFor(t, 30*time.Second, "the leaving replica to exit", leaving.Exited)
	time.Sleep(2 * time.Second)
	for _, r := range reps {
		if l := errors.FindAllString(r.Log(), -1); len(l) > 0 {
			t.Errorf("%s logged errors in normal operation:\n%v", r.ID, l)
		}
	}
}
