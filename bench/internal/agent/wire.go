// Package agent is the replica-process side of the benchmark and the
// parent's client for it. The parent re-executes its own binary once per
// replica with EnvChild set; the child starts one replica of the lock service
// under test and serves net/rpc (gob over one loopback TCP connection) so the
// parent can run workload phases inside it. Only control messages cross that
// connection — a few per workload run — never the individual lock operations:
// those run in the replica process, against the embedded client side.
package agent

import (
	"slices"
	"time"
)

// EnvChild is the environment variable that makes the benchmark binary run as
// a replica process; its value is a JSON ChildConfig.
const EnvChild = "RAFTLOCK_BENCH_CHILD"

// ChildConfig is what a replica process needs to start its replica.
type ChildConfig struct {
	System  string     // registered lockservice.System name
	Index   int        // replica index
	Addrs   [][]string // every replica's reserved loopback addresses
	DataDir string     // this replica's empty data directory
}

// Empty is the argument or reply of calls that carry nothing.
type Empty struct{}

// WaitArgs bounds the wait for the replica to start.
type WaitArgs struct{ Timeout time.Duration }

// StatusReply is the replica's view of the cluster.
type StatusReply struct {
	Leader   bool
	LogIndex uint64
}

// OpenArgs asks for a fresh pool of sessions (closing the previous pool).
type OpenArgs struct {
	Count   int
	TTL     time.Duration
	Timeout time.Duration // for the whole call
}

// LoopArgs runs the workers: worker k loops Lock then Unlock with pool
// session k, from StartAt until StopAt (CLOCK_MONOTONIC ns, see package
// mono).
type LoopArgs struct {
	Workers []WorkerSpec
	StartAt int64
	StopAt  int64
}

// WorkerSpec is one worker of a loop.
type WorkerSpec struct {
	// Name is the lock the worker takes. Several workers may share a name
	// (contention).
	Name string
	// Fresh makes every iteration take a new lock, Name/<n>, so that an
	// attempt abandoned at its timeout cannot be in the way of the next.
	Fresh bool
	// Timeout bounds each Lock and each Unlock.
	Timeout time.Duration
	// Mode is what the worker takes: "" a lock, ModeRead a read grant,
	// ModeWrite the write grant of a read-write lock, ModeSemaphore
	// Permits of a semaphore of Limit permits.
	Mode           string
	Limit, Permits int
}

// Worker modes (WorkerSpec.Mode).
const (
	ModeRead      = "read"
	ModeWrite     = "write"
	ModeSemaphore = "semaphore"
)

// Op is one completed Lock+Unlock, as CLOCK_MONOTONIC ns.
type Op struct {
	Worker      int32
	LockStart   int64 // Lock called
	Granted     int64 // Lock returned the lease
	UnlockStart int64 // Unlock called
	UnlockEnd   int64 // Unlock returned
}

// LoopReply holds every completed operation of the loop.
type LoopReply struct {
	Ops    []Op
	Errors Errors
}

// HoldArgs makes each pool session acquire PerSession locks named
// Prefix/<replica>/<session>/<k> and keep them until CloseSessions.
type HoldArgs struct {
	Prefix      string
	PerSession  int
	Concurrency int
	OpTimeout   time.Duration
}

// HoldReply reports the acquisitions.
type HoldReply struct {
	Held    int
	Elapsed time.Duration
	Errors  Errors
}

// ProfileArgs asks for a CPU profile (with EnvCPUProfile) from StartAt to
// StopAt (CLOCK_MONOTONIC ns), named after Label.
type ProfileArgs struct {
	Label           string
	StartAt, StopAt int64
}

// CloseArgs bounds the closing of the session pool.
type CloseArgs struct{ Timeout time.Duration }

// MemReply is the Go runtime's view of memory after a full GC and a return
// of free memory to the OS (debug.FreeOSMemory).
type MemReply struct {
	HeapInuse uint64
	Sys       uint64
}

// Errors counts failures and keeps the first few distinct messages.
type Errors struct {
	Count int
	First []string
}

const keepErrors = 4

// add records err.
func (e *Errors) add(err error) {
	e.Count++
	e.keep(err.Error())
}

func (e *Errors) keep(msg string) {
	if len(e.First) < keepErrors && !slices.Contains(e.First, msg) {
		e.First = append(e.First, msg)
	}
}

// Merge adds o's errors to e.
func (e *Errors) Merge(o Errors) {
	e.Count += o.Count
	for _, msg := range o.First {
		e.keep(msg)
	}
}

// SnapshotArgs bounds a snapshot.
type SnapshotArgs struct{ Timeout time.Duration }

// SnapshotReply describes a snapshot taken by the replica.
type SnapshotReply struct {
	Bytes int64
	Took  time.Duration
}

// AwaitArgs starts (StartAwait) one blocked Lock call per name, or bounds
// the wait for their outcome (AwaitResult: Names unused).
type AwaitArgs struct {
	Names   []string
	Timeout time.Duration
}

// AwaitReply is when each awaited lock was granted (mono ns; 0: it was not).
type AwaitReply struct {
	Granted []int64
	Errors  Errors
}

// LostReply counts the pool sessions lost so far.
type LostReply struct{ Sessions, Lost int }
