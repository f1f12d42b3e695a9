package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft-wal/migrate"
)

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
func MigrateLogStore(ctx context.Context, dataDir string, from, to LogStore) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	known := func(k LogStore) bool { return k == LogStoreBolt || k == LogStoreWAL }
	if !known(from) || !known(to) || from == to {
		return fmt.Errorf("%w: migrate from %q to %q", ErrInvalidConfig, from, to)
	}
	hasFrom, hasTo := holdsLogStore(dataDir, from), holdsLogStore(dataDir, to)
	switch {
	case hasFrom && hasTo: // crashed after the rename: finish
		return removeLogStore(dataDir, from)
	case hasTo:
		return nil // done before
	case !hasFrom:
		return fmt.Errorf("%w: %s holds no %q log store", ErrInvalidConfig, dataDir, from)
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
func migrateInto(ctx context.Context, dataDir string, src *storage, to LogStore, logger hclog.Logger) error {
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

// stableKeys are every key Raft and the node write to the stable store, in
// the two kinds Raft and raft-wal keep apart (SetUint64 and Set). A new
// stable key must be added here, or MigrateLogStore loses it.
var (
	stableUintKeys  = [][]byte{[]byte("CurrentTerm"), []byte("LastVoteTerm")}
	stableBytesKeys = [][]byte{
		[]byte("LastVoteCand"),
		keyIncarnation, keyRaftID, keyClusterID,
		keyFormation, keyKnownPeers, keyRecovered,
	}
)

func copyLogStore(ctx context.Context, dst, src *storage) error {
	first, err := src.logs.FirstIndex()
	if err != nil {
		return err
	}
	if first > 0 { // an empty log has nothing to copy
		if err := migrate.CopyLogs(ctx, dst.logs, src.logs, 1<<20, nil); err != nil {
			return err
		}
	}
	for _, k := range stableUintKeys {
		v, err := src.stable.GetUint64(k)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", k, err)
		}
		if err := dst.stable.SetUint64(k, v); err != nil {
			return fmt.Errorf("write %s: %w", k, err)
		}
	}
	for _, k := range stableBytesKeys {
		v, err := src.stable.Get(k)
		if isNotFound(err) || (err == nil && len(v) == 0) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", k, err)
		}
		if err := dst.stable.Set(k, v); err != nil {
			return fmt.Errorf("write %s: %w", k, err)
		}
	}
	return nil
}

// isNotFound: raft-boltdb's missing key (raft-wal answers nil, nil).
func isNotFound(err error) bool { return err != nil && err.Error() == "not found" }

// openLogStore opens a store of kind k in dataDir, or at path if not "".
func openLogStore(dataDir string, k LogStore, path string, logger hclog.Logger) (*storage, error) {
	if path == "" {
		path = logStorePath(dataDir, k)
	}
	if k == LogStoreWAL {
		return openWALAt(path, logger)
	}
	return openBoltAt(path)
}

func logStorePath(dataDir string, k LogStore) string {
	if k == LogStoreWAL {
		return filepath.Join(dataDir, walDir)
	}
	return filepath.Join(dataDir, boltFile)
}

// holdsLogStore reports whether dataDir holds state of a store of kind k.
func holdsLogStore(dataDir string, k LogStore) bool {
	if k == LogStoreWAL {
		return fileHasData(filepath.Join(dataDir, walDir, "wal-meta.db"))
	}
	return fileHasData(filepath.Join(dataDir, boltFile))
}

func removeLogStore(dataDir string, k LogStore) error {
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
