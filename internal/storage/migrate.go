//go:build raftwal

package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft-wal/migrate"
)

// Migrate converts the stores in dataDir of a stopped node from kind from
// to kind to (two different kinds; the caller checks that dataDir holds a
// store of either): it copies the Raft log and the stable state — Raft's
// term and vote and the keys in stableBytesKeys — into a new store beside
// the old one under a temporary name, closes it (every write synced),
// renames it into place and only then removes the old store. The rename is
// the commit point: a crash before it leaves the old store as it was (the
// next attempt discards the half-written copy); a crash after it leaves
// both (Other reports it, and the node refuses to start), and the next call
// finishes by removing the old one. Snapshots are files beside either store
// and are not touched. It returns nil at once if dataDir already holds only
// a to store; a running node's store lock makes it fail with "locked by
// another process". ctx bounds the copy.
func Migrate(ctx context.Context, dataDir string, from, to Kind) error {
	switch hasFrom, hasTo := Holds(dataDir, from), Holds(dataDir, to); {
	case hasFrom && hasTo: // crashed after the rename: finish
		return removeLogStore(dataDir, from)
	case hasTo:
		return nil // done before
	}
	logger := hclog.NewNullLogger()
	src, err := openLogStore(dataDir, from, "", logger)
	if err != nil {
		return err
	}
	if err := migrateInto(ctx, dataDir, src, to, logger); err != nil {
		src.close()
		return fmt.Errorf("node: migrate %s from %s to %s: %w", dataDir, from, to, err)
	}
	if err := src.close(); err != nil {
		return fmt.Errorf("node: migrate: close the old store: %w", err)
	}
	return removeLogStore(dataDir, from)
}

// migrateInto copies src into a new store of kind to under a temporary
// name and renames it into place.
func migrateInto(ctx context.Context, dataDir string, src *Stores, to Kind, logger hclog.Logger) error {
	tmp := logStorePath(dataDir, to) + ".migrating"
	if err := os.RemoveAll(tmp); err != nil { // an earlier attempt's
		return err
	}
	dst, err := openLogStore(dataDir, to, tmp, logger)
	if err != nil {
		return err
	}
	err = copyLogStore(ctx, dst, src)
	if cerr := dst.close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, logStorePath(dataDir, to)); err != nil {
		return err
	}
	return syncDir(dataDir)
}

// stableUintKeys and stableBytesKeys are the keys Migrate copies: Raft's
// and the node's (see KeyIncarnation), in the two kinds Raft and raft-wal
// keep apart (SetUint64 and Set). A new stable key must be added here, or
// Migrate loses it.
var (
	stableUintKeys  = [][]byte{[]byte("CurrentTerm"), []byte("LastVoteTerm")}
	stableBytesKeys = [][]byte{
		[]byte("LastVoteCand"),
		KeyIncarnation, KeyRaftID, KeyClusterID,
		KeyFormation, KeyKnownPeers, KeyRecovered, KeyLeft,
	}
)

func copyLogStore(ctx context.Context, dst, src *Stores) error {
	first, err := src.Logs.FirstIndex()
	if err != nil {
		return err
	}
	if first > 0 { // an empty log has nothing to copy
		if err := migrate.CopyLogs(ctx, dst.Logs, src.Logs, 1<<20, nil); err != nil {
			return err
		}
	}
	for _, k := range stableUintKeys {
		v, err := src.Stable.GetUint64(k)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", k, err)
		}
		if err := dst.Stable.SetUint64(k, v); err != nil {
			return fmt.Errorf("write %s: %w", k, err)
		}
	}
	for _, k := range stableBytesKeys {
		v, err := src.Stable.Get(k)
		if isNotFound(err) || (err == nil && len(v) == 0) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", k, err)
		}
		if err := dst.Stable.Set(k, v); err != nil {
			return fmt.Errorf("write %s: %w", k, err)
		}
	}
	return nil
}

// isNotFound: raft-boltdb's missing key (raft-wal answers nil, nil).
func isNotFound(err error) bool { return err != nil && err.Error() == "not found" }

// openLogStore opens a store of kind k in dataDir, or at path if not "".
func openLogStore(dataDir string, k Kind, path string, logger hclog.Logger) (*Stores, error) {
	if path == "" {
		path = logStorePath(dataDir, k)
	}
	if k == WAL {
		return openWALAt(path, logger)
	}
	return openBoltAt(path)
}

func logStorePath(dataDir string, k Kind) string {
	if k == WAL {
		return filepath.Join(dataDir, walDir)
	}
	return filepath.Join(dataDir, boltFile)
}

func removeLogStore(dataDir string, k Kind) error {
	if err := os.RemoveAll(logStorePath(dataDir, k)); err != nil {
		return fmt.Errorf("node: migrate: remove the old %s store: %w", k, err)
	}
	return syncDir(dataDir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}
