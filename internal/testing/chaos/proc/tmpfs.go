package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// The disk class gives every replica a size-limited data dir: a small
// tmpfs mounted on it (root only), which the nemesis fills with a filler
// file to make the replica's disk full (ENOSPC on every write of its bolt
// store), and frees again. Unmounted on every exit path.

// tmpfsSize is each replica's data dir size: room for the run's log and
// snapshots with margin.
const tmpfsSize = "64m"

// mountTmpfs mounts a tmpfs of tmpfsSize on dir (created if needed).
func mountTmpfs(dir string) error {
	if os.Geteuid() != 0 {
		return errors.New("a size-limited data dir needs root (tmpfs)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return run("mount", "-t", "tmpfs", "-o", "size="+tmpfsSize+",mode=0755", "tmpfs", dir)
}

// unmountTmpfs unmounts dir (lazily, so a process still holding files in it
// cannot block the clean-up).
func unmountTmpfs(dir string) error {
	return run("umount", "-l", dir)
}

// fillerPath is the file that fills a replica's data dir.
func fillerPath(dataDir string) string { return filepath.Join(dataDir, "chaos-filler") }

// fillDisk writes zeros into dir's filler file until the file system is
// full; it returns the bytes written.
func fillDisk(dataDir string) (int64, error) {
	f, err := os.OpenFile(fillerPath(dataDir), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var total int64
	for {
		n, err := f.Write(buf)
		total += int64(n)
		if errors.Is(err, syscall.ENOSPC) {
			// Fill the last pages too.
			for _, k := range []int{64 << 10, 4 << 10, 512} {
				for {
					n, err := f.Write(buf[:k])
					total += int64(n)
					if err != nil {
						break
					}
				}
			}
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("fill %s: %w", dataDir, err)
		}
		if total > 1<<30 {
			return total, fmt.Errorf("fill %s: more than 1 GiB written: not a size-limited data dir", dataDir)
		}
	}
}

// freeDisk removes the filler file.
func freeDisk(dataDir string) error {
	err := os.Remove(fillerPath(dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
