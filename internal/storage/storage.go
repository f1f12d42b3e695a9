package storage

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

// Kind names a kind of Raft log and stable store (node's Config.LogStore
// converts to it).
type Kind string

// The log stores a node can keep under its data dir.
const (
	// Bolt is raft-boltdb/v2 (raft.db): the default.
	Bolt Kind = "bolt"
	// WAL is hashicorp/raft-wal (the wal directory).
	WAL Kind = "wal"
)

// Stores is where Raft keeps its log, its stable state and its snapshots.
type Stores struct {
	Logs   raft.LogStore
	Stable raft.StableStore
	Snaps  raft.SnapshotStore
	close  func() error
	// anchors is Logs once WithAnchors wrapped it (see anchoredLogs).
	anchors *anchoredLogs
}

const (
	// walDir is WAL's directory in the data dir: raft-wal's segment files
	// and its meta store (wal-meta.db), which also holds the stable state.
	walDir        = "wal"
	logCacheSize  = 512 // recent entries served from memory to followers
	snapshotsKept = 2
	boltFile      = "raft.db" // Bolt's file in the data dir
)

// Memory returns stores that keep everything in memory.
func Memory() *Stores {
	m := raft.NewInmemStore()
	return &Stores{Logs: m, Stable: m, Snaps: raft.NewInmemSnapshotStore(), close: func() error { return nil }}
}

// Open opens (or creates) a log and stable store of kind k in dataDir, with
// a cache of recent entries in front of it, and the file snapshot store
// beside it (paced writeback, see stepSyncStore). The caller checks first,
// with Other, that dataDir holds no store of the other kind.
func Open(dataDir string, k Kind, logger hclog.Logger) (*Stores, error) {
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return nil, fmt.Errorf("node: data dir: %w", err)
	}
	var (
		st  *Stores
		err error
	)
	switch k {
	case WAL:
		st, err = openWAL(dataDir, logger)
	default:
		st, err = openBolt(dataDir)
	}
	if err != nil {
		return nil, err
	}
	if st.Logs, err = raft.NewLogCache(logCacheSize, st.Logs); err != nil {
		st.close()
		return nil, fmt.Errorf("node: log cache: %w", err)
	}
	files, err := raft.NewFileSnapshotStoreWithLogger(dataDir, snapshotsKept, logger)
	if err != nil {
		st.close()
		return nil, fmt.Errorf("node: snapshot store: %w", err)
	}
	st.Snaps = stepSyncStore{SnapshotStore: files, base: dataDir, logger: logger}
	return st, nil
}

// openWAL opens (or creates) the raft-wal log and stable store in dir/wal.
func openWAL(dir string, logger hclog.Logger) (*Stores, error) {
	return openWALAt(filepath.Join(dir, walDir), logger)
}

// Close closes the log and stable store (snapshots need no closing).
func (st *Stores) Close() error { return st.close() }

// openBolt opens (or creates) the raft-boltdb/v2 log and stable store in
// dir/raft.db.
func openBolt(dir string) (*Stores, error) {
	return openBoltAt(filepath.Join(dir, boltFile))
}

// openBoltAt opens (or creates) a raft-boltdb/v2 store in the file path.
func openBoltAt(path string) (*Stores, error) {
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
	return &Stores{Logs: db, Stable: db, close: db.Close}, nil
}

// Other names the kind of log store other than want that dataDir holds
// state of, or "" if it holds none.
func Other(dataDir string, want Kind) Kind {
	other := WAL
	if want == WAL {
		other = Bolt
	}
	if Holds(dataDir, other) {
		return other
	}
	return ""
}

// Holds reports whether dataDir holds state of a store of kind k.
func Holds(dataDir string, k Kind) bool {
	if k == WAL {
		return fileHasData(filepath.Join(dataDir, walDir, "wal-meta.db"))
	}
	return fileHasData(filepath.Join(dataDir, boltFile))
}

func fileHasData(name string) bool {
	fi, err := os.Stat(name)
	return err == nil && fi.Size() > 0
}
