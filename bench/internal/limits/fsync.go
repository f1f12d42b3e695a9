// Package limits measures what the machine allows any Raft-based lock service:
// the latency of fsync in the data directory, and a bare hashicorp/raft
// cluster's commit rate.
package limits

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/bench/internal/report"
	"github.com/raftlock/raftlock/bench/internal/stats"
)

// Fsync appends 4 KiB to a new file in dir and fdatasyncs it, n times (or
// until the timeout), and returns the latency of each append+sync.
func Fsync(dir string, n int, timeout time.Duration) (*report.FsyncLimit, error) {
	f, err := newSyncFile(dir, "fsync-*")
	if err != nil {
		return nil, err
	}
	defer f.close()
	lat := make([]int64, 0, n)
	deadline := time.Now().Add(timeout)
	for i := 0; i < n && time.Now().Before(deadline); i++ {
		start := time.Now()
		if err := f.appendSync(); err != nil {
			return nil, err
		}
		lat = append(lat, int64(time.Since(start)))
	}
	return &report.FsyncLimit{Dir: dir, Iterations: len(lat), Latency: stats.Summarize(lat)}, nil
}

// syncFile is a new file in the data directory that the limits append to
// and fdatasync, 4 KiB at a time.
type syncFile struct {
	f     *os.File
	block []byte
}

// newSyncFile creates the file and makes it durable itself, so that what
// is measured next is data syncs only.
func newSyncFile(dir, pattern string) (*syncFile, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	block := make([]byte, 4096)
	for i := range block {
		block[i] = byte(i)
	}
	return &syncFile{f: f, block: block}, nil
}

// appendSync appends one block and fdatasyncs the file.
func (s *syncFile) appendSync() error {
	if _, err := s.f.Write(s.block); err != nil {
		return err
	}
	if err := syscall.Fdatasync(int(s.f.Fd())); err != nil {
		return fmt.Errorf("fdatasync: %w", err)
	}
	return nil
}

// close closes and removes the file.
func (s *syncFile) close() {
	s.f.Close()
	os.Remove(s.f.Name())
}

// FsyncRates runs, for each count in writers, that many concurrent loops of
// 4 KiB append + fdatasync (one new file in dir each) for d, and returns
// each count's rate per writer: whether the disk serves the replicas'
// syncs in parallel or one after another.
func FsyncRates(dir string, writers []int, d time.Duration) ([]report.FsyncRate, error) {
	var out []report.FsyncRate
	for _, n := range writers {
		counts := make([]int, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		stop := time.Now().Add(d)
		for i := range n {
			wg.Go(func() { counts[i], errs[i] = syncLoop(dir, stop) })
		}
		wg.Wait()
		total := 0
		for i := range n {
			if errs[i] != nil {
				return out, errs[i]
			}
			total += counts[i]
		}
		out = append(out, report.FsyncRate{Writers: n, PerWriter: float64(total) / float64(n) / d.Seconds()})
	}
	return out, nil
}

// syncLoop appends 4 KiB and fdatasyncs a new file in dir until stop, and
// returns the rounds completed.
func syncLoop(dir string, stop time.Time) (int, error) {
	f, err := newSyncFile(dir, "fsync-rate-*")
	if err != nil {
		return 0, err
	}
	defer f.close()
	n := 0
	for time.Now().Before(stop) {
		if err := f.appendSync(); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
