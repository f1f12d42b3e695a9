package node

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/internal/storage"
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

// openStorage opens the stores cfg asks for (package storage), with the
// DiskFault test hook if any.
func openStorage(cfg *Config, logger hclog.Logger) (*storage.Stores, error) {
	var st *storage.Stores
	if cfg.InMemory {
		st = storage.Memory()
	} else {
		if other := storage.Other(cfg.DataDir, storage.Kind(cfg.LogStore)); other != "" {
			return nil, fmt.Errorf("%w: LogStore is %q but %s holds a %q log store (convert it with MigrateLogStore)",
				ErrInvalidConfig, cfg.LogStore, cfg.DataDir, other)
		}
		var err error
		if st, err = storage.Open(cfg.DataDir, storage.Kind(cfg.LogStore), logger); err != nil {
			return nil, err
		}
	}
	if fault := cfg.hooks.DiskFault; fault != nil {
		st.WithFaults(fault)
	}
	return st, nil
}

// MigrateLogStore converts the data dir of a stopped node from one log
// store to the other (Config.LogStore): it copies the Raft log and the
// stable state — Raft's term and vote, the node's identity (incarnation,
// Raft id, cluster id), its formation record, known peers and recovery mark
// — into a new store beside the old one under a temporary name, closes it
// (every write synced), renames it into place and only then removes the old
// store. The rename is the commit point: a crash before it leaves the old
// store as it was (the next attempt discards the half-written copy); a
// crash after it leaves both (Start refuses such a dir), and the next call
// finishes by removing the old one. Snapshots are files beside either store and are not touched.
//
// Start the node with Config.LogStore = to afterwards. A node that is
// running holds its store's lock: the call fails with "locked by another
// process". It fails with ErrInvalidConfig if from or to is not a known
// kind, if they are the same, or if the dir holds no from store; it returns
// nil at once if the dir already holds only a to store. ctx bounds the copy.
// It needs the WAL in the build (build tag raftwal, see Config.LogStore):
// without it, it fails with ErrInvalidConfig.
func MigrateLogStore(ctx context.Context, dataDir string, from, to LogStore) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	known := func(k LogStore) bool { return k == LogStoreBolt || k == LogStoreWAL }
	if !known(from) || !known(to) || from == to {
		return fmt.Errorf("%w: migrate from %q to %q", ErrInvalidConfig, from, to)
	}
	if !storage.WALBuilt {
		return fmt.Errorf("%w: migrating between log stores needs a build with -tags raftwal", ErrInvalidConfig)
	}
	if !storage.Holds(dataDir, storage.Kind(from)) && !storage.Holds(dataDir, storage.Kind(to)) {
		return fmt.Errorf("%w: %s holds no %q log store", ErrInvalidConfig, dataDir, from)
	}
	return storage.Migrate(ctx, dataDir, storage.Kind(from), storage.Kind(to))
}
