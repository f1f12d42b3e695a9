// Package mono reads CLOCK_MONOTONIC as nanoseconds that are comparable across
// processes on one machine, so a release in one replica process and the next
// grant in another can be subtracted.
package mono

import (
	"time"

	"golang.org/x/sys/unix"
)

var (
	base   = time.Now()
	baseNS = clock()
)

func clock() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("mono: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}

// Now returns CLOCK_MONOTONIC in nanoseconds. It costs one vDSO clock read
// (Go's own monotonic clock is CLOCK_MONOTONIC; only its origin differs).
func Now() int64 { return baseNS + int64(time.Since(base)) }

// Until returns the time left until the monotonic instant t.
func Until(t int64) time.Duration { return time.Duration(t - Now()) }

// Sleep sleeps until the monotonic instant t (at once if it has passed).
func Sleep(t int64) {
	if d := Until(t); d > 0 {
		time.Sleep(d)
	}
}
