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

// LogStore names a kind of Raft log and stable store (Config.LogStore).
type LogStore string

// The log stores a node can keep under its DataDir.
const (
	// LogStoreBolt is raft-boltdb/v2 (raft.db): the default.
	LogStoreBolt LogStore = "bolt"
	// LogStoreWAL is hashicorp/raft-wal (the wal directory).
	LogStoreWAL LogStore = "wal"
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
	boltFile      = "raft.db" // LogStoreBolt's file in the data dir
)

func openStorage(cfg *Config, logger hclog.Logger) (*storage, error) {
	if cfg.InMemory {
		m := raft.NewInmemStore()
		return &storage{logs: m, stable: m, snaps: raft.NewInmemSnapshotStore(), close: func() error { return nil }}, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("node: data dir: %w", err)
	}
	if other := otherLogStore(cfg.DataDir, cfg.LogStore); other != "" {
		return nil, fmt.Errorf("%w: LogStore is %q but %s holds a %q log store (convert it with MigrateLogStore)",
			ErrInvalidConfig, cfg.LogStore, cfg.DataDir, other)
	}
	var (
		st  *storage
		err error
	)
	switch cfg.LogStore {
	case LogStoreWAL:
		st, err = openWAL(cfg.DataDir, logger)
	default:
		st, err = openBolt(cfg.DataDir)
	}
	if err != nil {
		return nil, err
	}
	if st.logs, err = raft.NewLogCache(logCacheSize, st.logs); err != nil {
		st.close()
		return nil, fmt.Errorf("node: log cache: %w", err)
	}
	files, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, snapshotsKept, logger)
	if err != nil {
		st.close()
		return nil, fmt.Errorf("node: snapshot store: %w", err)
	}
	st.snaps = stepSyncStore{SnapshotStore: files, base: cfg.DataDir, logger: logger}
	return st, nil
}

// openBolt opens (or creates) the raft-boltdb/v2 log and stable store in
// dir/raft.db.
func openBolt(dir string) (*storage, error) {
	return openBoltAt(filepath.Join(dir, boltFile))
}

// openBoltAt opens (or creates) a raft-boltdb/v2 store in the file path.
func openBoltAt(path string) (*storage, error) {
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
	return &storage{logs: db, stable: db, close: db.Close}, nil
}
