//go:build !raftwal

package chaos

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// openWALLog: a build without the WAL (build tag raftwal) cannot read a
// raft-wal log (see openLogStore).
func openWALLog(walPath string) (raft.LogStore, func() error, error) {
	return nil, nil, fmt.Errorf("open %s: the raft-wal log needs a build with -tags raftwal", walPath)
}
