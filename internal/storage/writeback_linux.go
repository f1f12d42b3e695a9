package storage

import (
	"os"

	"golang.org/x/sys/unix"
)

const writebackSupported = true

// writeback starts writing the range of f to the disk and waits until it
// is written (data only: no metadata, no cache flush of the device — the
// sink's final sync does those).
func writeback(f *os.File, off, n int64) error {
	return unix.SyncFileRange(int(f.Fd()), off, n,
		unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
}
