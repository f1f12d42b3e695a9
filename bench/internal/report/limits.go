package report

import (
	"fmt"
	"io"
	"slices"

	"github.com/raftlock/raftlock/bench/internal/stats"
)

// Limits are the floors and ceilings measured on this machine in the same
// run: what any Raft-based lock service here can at best achieve.
type Limits struct {
	Fsync *FsyncLimit `json:"fsync,omitempty"`
	// FsyncRates: the data directory's fdatasync rate with one writer and
	// with one per replica (the replicas of a run share this disk).
	FsyncRates []FsyncRate `json:"fsync_rates,omitempty"`
	BareRaft   []RaftLimit `json:"bare_raft,omitempty"`
	Errors     []string    `json:"errors,omitempty"`
}

// FsyncLimit is the latency of a 4 KiB append + fdatasync in the data dir.
type FsyncLimit struct {
	Dir        string        `json:"dir"`
	Iterations int           `json:"iterations"`
	Latency    stats.Latency `json:"latency"`
}

// FsyncRate is how many 4 KiB append + fdatasync rounds per second each of
// Writers concurrent writers (one file each) completed.
type FsyncRate struct {
	Writers   int     `json:"writers"`
	PerWriter float64 `json:"per_writer_per_s"`
}

// RaftLimit is a bare hashicorp/raft cluster's commit rate with a given
// number of concurrent appliers, one Apply in flight per applier.
type RaftLimit struct {
	Store         string        `json:"store"` // log store: bolt (raft-boltdb/v2) or wal (raft-wal)
	Appliers      int           `json:"appliers"`
	CommitsPerSec float64       `json:"commits_per_s"`
	Latency       stats.Latency `json:"latency"`
}

// WriteLimits writes the limits as markdown.
func WriteLimits(w io.Writer, l *Limits) {
	if l == nil {
		return
	}
	if f := l.Fsync; f != nil {
		fmt.Fprintf(w, "- fsync (4 KiB append + fdatasync, %d×, %s): p50 %.2f ms, p99 %.2f ms\n",
			f.Iterations, f.Dir, f.Latency.P50, f.Latency.P99)
	}
	if len(l.FsyncRates) > 0 {
		fmt.Fprint(w, "- fdatasync rate in a loop, one file per writer:")
		for i, r := range l.FsyncRates {
			if i > 0 {
				fmt.Fprint(w, ";")
			}
			fmt.Fprintf(w, " %d writer(s) %s/s each (%s/s together)", r.Writers,
				FormatNumber(r.PerWriter, 0), FormatNumber(r.PerWriter*float64(r.Writers), 0))
		}
		fmt.Fprintln(w)
	}
	var stores []string
	for _, r := range l.BareRaft {
		if !slices.Contains(stores, r.Store) {
			stores = append(stores, r.Store)
		}
	}
	for _, store := range stores {
		fmt.Fprintf(w, "- bare hashicorp/raft v1.7.3, 3 nodes, %s with fsync, loopback TCP, one Apply in flight per applier:\n", storeName(store))
		fmt.Fprintln(w)
		fmt.Fprintln(w, "  | appliers | commits/s | Lock+Unlock/s ceiling (÷2) | p50 ms | p99 ms |")
		fmt.Fprintln(w, "  |--:|--:|--:|--:|--:|")
		for _, r := range l.BareRaft {
			if r.Store != store {
				continue
			}
			fmt.Fprintf(w, "  | %d | %s | %s | %.2f | %.2f |\n", r.Appliers,
				FormatNumber(r.CommitsPerSec, 0), FormatNumber(r.CommitsPerSec/2, 0), r.Latency.P50, r.Latency.P99)
		}
		fmt.Fprintln(w)
	}
	for _, e := range l.Errors {
		fmt.Fprintf(w, "- limit not measured: %s\n", e)
	}
}

// storeName names a bare cluster's log store.
func storeName(store string) string {
	if store == "wal" {
		return "raft-wal v0.4.2"
	}
	return "raft-boltdb/v2"
}
