package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// storage is where Raft keeps its log, its stable state and its snapshots.
type storage struct {
	logs   raft.LogStore
	stable raft.StableStore
	snaps  raft.SnapshotStore
	close  func() error
	// anchors is logs (storage_anchor.go: the snapshot-anchor workaround).
	anchors *anchoredLogs
}

const (
	logCacheSize  = 512 // recent entries served from memory to followers
	snapshotsKept = 2
)

func openStorage(cfg *Config, logger hclog.Logger) (*storage, error) {
	if cfg.InMemory {
		m := raft.NewInmemStore()
		return &storage{logs: m, stable: m, snaps: raft.NewInmemSnapshotStore(), close: func() error { return nil }}, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("node: data dir: %w", err)
	}
	path := filepath.Join(cfg.DataDir, "raft.db")
	db, err := raftboltdb.New(raftboltdb.Options{
		Path: path,
		BoltOptions: &bbolt.Options{
			Timeout: time.Second, // the file lock: another process using the dir
			// Durability is unchanged: every commit still fsyncs. The freelist
			// is rebuilt on open instead of written on every commit.
			NoFreelistSync: true,
			FreelistType:   bbolt.FreelistMapType,
		},
	})
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			return nil, fmt.Errorf("node: %s is locked by another process", path)
		}
		return nil, fmt.Errorf("node: open %s: %w", path, err)
	}
	logs, err := raft.NewLogCache(logCacheSize, db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("node: log cache: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, snapshotsKept, logger)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("node: snapshot store: %w", err)
	}
	return &storage{logs: logs, stable: db, snaps: snaps, close: db.Close}, nil
}
