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
	// Batched: the bare cluster under an ideal group commit (BatchedLimit).
	Batched []BatchedLimit `json:"bare_raft_batched,omitempty"`
	Errors  []string       `json:"errors,omitempty"`
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

// BatchedLimit is the bare cluster's command rate under an ideal group
// commit: Workers closed-loop workers (one command in flight each) in the
// leader's process, every queued command packed into one entry whenever
// fewer than Depth entries are in flight. An upper bound for a lock service
// on this Raft and disk with that many workers: it has none of a service's
// own costs (forwarding, linger, state machine, answers).
type BatchedLimit struct {
	Store            string        `json:"store"`
	Workers          int           `json:"workers"`
	Depth            int           `json:"depth"`
	Gather           bool          `json:"gather"`          // waited for every worker's command (at most 1 ms)
	Woken            bool          `json:"woken,omitempty"` // the gather woke on each push (else it polled every 10 µs)
	CommandsPerSec   float64       `json:"commands_per_s"`
	CommandsPerEntry float64       `json:"commands_per_entry"`
	Latency          stats.Latency `json:"latency"`
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
	for _, store := range stores {
		best := BestBatched(l.Batched, store)
		if len(best) == 0 {
			continue
		}
		fmt.Fprintf(w, "- the same bare cluster (%s) under an ideal group commit: closed-loop workers in the leader's process, "+
			"every queued command in one entry, 1 or 2 entries in flight, sent at once or once every worker's command is queued "+
			"(found by polling the queue or woken by each push; no forwarding, no state machine); the best of those six per worker count, an upper bound for a lock service on this Raft and disk:\n", storeName(store))
		fmt.Fprintln(w)
		fmt.Fprintln(w, "  | workers | commands/s | Lock+Unlock/s ceiling (÷2) | entries in flight | gathered | commands/entry | p50 ms |")
		fmt.Fprintln(w, "  |--:|--:|--:|--:|---|--:|--:|")
		for _, r := range best {
			fmt.Fprintf(w, "  | %d | %s | %s | %d | %s | %.1f | %.2f |\n", r.Workers, FormatNumber(r.CommandsPerSec, 0),
				FormatNumber(r.CommandsPerSec/2, 0), r.Depth, gatherName(r), r.CommandsPerEntry, r.Latency.P50)
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

// BestBatched returns, for each worker count of store in ls (in the order
// first seen), the measurement with the highest command rate.
func BestBatched(ls []BatchedLimit, store string) []BatchedLimit {
	var out []BatchedLimit
	at := map[int]int{}
	for _, r := range ls {
		if r.Store != store {
			continue
		}
		i, ok := at[r.Workers]
		if !ok {
			at[r.Workers] = len(out)
			out = append(out, r)
		} else if r.CommandsPerSec > out[i].CommandsPerSec {
			out[i] = r
		}
	}
	return out
}

// gatherName says how a batched measurement gathered its entries.
func gatherName(r BatchedLimit) string {
	switch {
	case r.Woken:
		return "woken"
	case r.Gather:
		return "polled"
	}
	return "no"
}
