//go:build !linux

package storage

import (
	"errors"
	"os"
)

// Stepwise snapshot writeback uses sync_file_range, which only Linux has.
const writebackSupported = false

func writeback(*os.File, int64, int64) error { return errors.ErrUnsupported }
