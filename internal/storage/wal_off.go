//go:build !raftwal

package storage

import (
	"context"
	"errors"

	"github.com/hashicorp/go-hclog"
)

// WALBuilt: this build has the raft-wal log store (build tag raftwal).
// Without the tag, hashicorp/raft-wal — and github.com/coreos/etcd, which
// its file system layer imports — stay out of the build.
const WALBuilt = false

// errNoWAL: a WAL store was asked of a build without it. node refuses such
// a Config, and MigrateLogStore, before they get here.
var errNoWAL = errors.New("node: the raft-wal log store is not in this build (build with -tags raftwal)")

func openWALAt(string, hclog.Logger) (*Stores, error) { return nil, errNoWAL }

// Migrate needs both kinds of store: without the WAL it has nothing to
// convert.
func Migrate(context.Context, string, Kind, Kind) error { return errNoWAL }
