// Package limits measures what the machine allows any Raft-based lock service:
// the latency of fsync in the data directory, and a bare hashicorp/raft
// cluster's commit rate.
package limits

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/bench/internal/report"
	"github.com/raftlock/raftlock/bench/internal/stats"
)

// Fsync appends 4 KiB to a new file in dir and fdatasyncs it, n times (or
// until the timeout), and returns the latency of each append+sync.
func Fsync(dir string, n int, timeout time.Duration) (*report.FsyncLimit, error) {
	f, err := os.CreateTemp(dir, "fsync-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, 4096)
	for i := range block {
		block[i] = byte(i)
	}
	// Make the file itself durable first: the loop measures data syncs.
	if err := f.Sync(); err != nil {
		return nil, err
	}
	lat := make([]int64, 0, n)
	deadline := time.Now().Add(timeout)
	for i := 0; i < n && time.Now().Before(deadline); i++ {
		start := time.Now()
		if _, err := f.Write(block); err != nil {
			return nil, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return nil, fmt.Errorf("fdatasync: %w", err)
		}
		lat = append(lat, int64(time.Since(start)))
	}
	return &report.FsyncLimit{Dir: dir, Iterations: len(lat), Latency: stats.Summarize(lat)}, nil
}
