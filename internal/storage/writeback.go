package storage

import (
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Snapshot writeback in steps. Raft's FileSnapshotStore writes a snapshot
// through the page cache and syncs the file once, when the sink closes. For
// a million locks that is 80 MiB handed to the disk at once, and the log
// store's fsyncs — every commit waits for one — queue behind it: on a
// 2-core host with one disk, every 1M-lock snapshot ended in a stall of
// 36–55 ms for a Lock+Unlock on another replica (several times its quiet
// p99). stepSyncStore starts the writeback of every snapshotWritebackStep
// bytes as they are written and waits for it (sync_file_range on Linux), so
// that the disk gets the snapshot in small pieces between the log's fsyncs
// and the final sync finds little left to do.
//
// Durability is unchanged: the writeback is extra, it commits no metadata,
// and the sink's Close still syncs the file and its directory before the
// snapshot counts. Where the writeback is not supported (other systems), or
// the state file cannot be found (see snapshotStatePath), the sink is the
// file store's own.
const snapshotWritebackStep = 4 << 20

// snapshotStatePath is where raft's FileSnapshotStore (v1.7.3, pinned)
// writes the state of snapshot id while its sink is open:
// <base>/snapshots/<id>.tmp/state.bin. TestSnapshotWritebackSteps fails if
// the layout changes.
func snapshotStatePath(base, id string) string {
	return filepath.Join(base, "snapshots", id+".tmp", "state.bin")
}

// stepSyncStore is a file snapshot store under base whose sinks write back
// in steps. Goroutine-safe as the store it wraps.
type stepSyncStore struct {
	raft.SnapshotStore
	base   string
	logger hclog.Logger
}

// Create implements raft.SnapshotStore.
func (s stepSyncStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration, configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil || !writebackSupported {
		return sink, err
	}
	f, err := os.Open(snapshotStatePath(s.base, sink.ID()))
	if err != nil {
		s.logger.Debug("snapshot written without stepwise writeback", "id", sink.ID(), "error", err)
		return sink, nil
	}
	return &stepSyncSink{SnapshotSink: sink, state: f, writeback: writeback, logger: s.logger}, nil
}

// stepSyncSink counts the bytes written and writes back each completed
// step. Used by one goroutine, as raft uses a sink.
type stepSyncSink struct {
	raft.SnapshotSink
	state           *os.File // the state file, opened read-only for its writeback
	writeback       func(f *os.File, off, n int64) error
	logger          hclog.Logger
	written, synced int64
	off             bool // a writeback failed: the rest is left to Close's sync
}

// Write implements io.Writer.
func (s *stepSyncSink) Write(p []byte) (int, error) {
	n, err := s.SnapshotSink.Write(p)
	s.written += int64(n)
	if off, size, ok := nextWriteback(s.written, s.synced, snapshotWritebackStep); ok && !s.off {
		if werr := s.writeback(s.state, off, size); werr != nil {
			s.off = true
			s.logger.Debug("snapshot writeback in steps stopped", "id", s.ID(), "error", werr)
		}
		s.synced = off + size
	}
	return n, err
}

// nextWriteback is the range to write back once written bytes are in the
// sink and synced of them have been written back: the whole steps not yet
// written back, or nothing (ok false) while less than step is pending.
func nextWriteback(written, synced, step int64) (off, size int64, ok bool) {
	pending := written - synced
	if pending < step {
		return 0, 0, false
	}
	return synced, pending - pending%step, true
}

// Close implements raft.SnapshotSink.
func (s *stepSyncSink) Close() error {
	err := s.SnapshotSink.Close()
	s.state.Close()
	return err
}

// Cancel implements raft.SnapshotSink.
func (s *stepSyncSink) Cancel() error {
	err := s.SnapshotSink.Cancel()
	s.state.Close()
	return err
}
