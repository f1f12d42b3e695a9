package node

import (
	"testing"

	"github.com/raftlock/raftlock/internal/storage"
)

// Config.LogStore and Config.DiskFault cross into package storage by
// conversion: the names on both sides must be the same.
func TestLogStoreAndDiskOpNamesMatchStorage(t *testing.T) {
	for _, k := range [][2]string{
		{string(LogStoreBolt), string(storage.Bolt)},
		{string(LogStoreWAL), string(storage.WAL)},
		{string(DiskAppend), string(storage.OpAppend)},
		{string(DiskRead), string(storage.OpRead)},
		{string(DiskDelete), string(storage.OpDelete)},
		{string(DiskStable), string(storage.OpStable)},
	} {
		if k[0] != k[1] {
			t.Errorf("node names %q, storage %q", k[0], k[1])
		}
	}
}
