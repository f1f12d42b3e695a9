//go:build raftwal

package chaos

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// openWALLog opens the raft-wal log in walPath (see openLogStore).
func openWALLog(walPath string) (raft.LogStore, func() error, error) {
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(walPath, wal.WithMetaStore(meta))
	if err != nil {
		meta.Close()
		return nil, nil, fmt.Errorf("open %s: %w", walPath, err)
	}
	return w, func() error { return errors.Join(w.Close(), meta.Close()) }, nil
}
