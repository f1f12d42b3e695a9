//go:build raftwal

package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"golang.org/x/sys/unix"
)

// walLockFile is held (flock) while a node has the WAL open: raft-wal's
// meta store would otherwise wait for ever on another process's bolt lock.
const walLockFile = "LOCK"

// WALBuilt: this build has the raft-wal log store (build tag raftwal).
const WALBuilt = true

// openWALAt opens (or creates) a raft-wal log and stable store in path.
func openWALAt(path string, logger hclog.Logger) (*Stores, error) {
	if err := os.MkdirAll(path, 0o750); err != nil {
		return nil, fmt.Errorf("node: wal dir: %w", err)
	}
	unlock, err := lockDir(path)
	if err != nil {
		return nil, err
	}
	// Our own meta store: raft-wal's Close (v0.4.0–v0.4.2) leaves the one it opens
	// itself open (and its file locked).
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(path, wal.WithLogger(logger.Named("wal")), wal.WithMetaStore(meta))
	if err != nil {
		meta.Close()
		unlock()
		return nil, fmt.Errorf("node: open %s: %w", path, err)
	}
	return &Stores{Logs: w, Stable: w, close: func() error {
		err := errors.Join(w.Close(), meta.Close())
		unlock()
		return err
	}}, nil
}

// lockDir takes an exclusive lock on dir's lock file, failing at once if
// another process (or another node in this one) holds it.
func lockDir(dir string) (unlock func(), err error) {
	name := filepath.Join(dir, walLockFile)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("node: lock %s: %w", name, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("node: %s is locked by another process", dir)
		}
		return nil, fmt.Errorf("node: lock %s: %w", name, err)
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}
