// Package proc is the multi-process layer of the chaos tests: it runs 3–5
// replica processes of examples/replica, a workload of HTTP clients (each
// bound to one replica) that lock, write into a shared SQLite file through
// fence.SQL with the token they got, and unlock, and a nemesis that pauses
// replicas longer than the TTL (SIGSTOP, then SIGCONT), kills and restarts
// them on their data dirs, and partitions them (one network namespace per
// replica and nftables drop rules, when running as root with ip and nft;
// otherwise no network faults, and the report says so). The history is
// checked by package chaos, with the log read back from the replicas' data
// dirs after the run.
//
// Everything is bounded in time, and everything is undone on every exit
// path: stopped processes are continued before they are killed, children
// die with the harness (Pdeathsig), namespaces are deleted (and leftovers
// of a crashed run are removed at the start of the next), temporary
// directories are removed unless a failed run's artifacts are kept.
package proc

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "modernc.org/sqlite"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/internal/testing/chaos"
)

// Options configure a run.
type Options struct {
	// Class is the fault class (Classes; default "mixed").
	Class             string
	Seed              int64
	Replicas          int           // 3..5
	Duration          time.Duration // workload time
	TTL               time.Duration // session TTL of the replicas' HTTP sessions
	Timing            string        // replica -timing: "test" or "lan"
	ClientsPerReplica int
	Locks             int
	Net               string // "auto", "netns" or "loopback"
	Root              string // module root (to build examples/replica)
	Bin               string // a prebuilt replica binary (skips the build)
	// OldBin is the previous release's replica binary (upgrade class: the
	// replicas start on it and are upgraded to Bin).
	OldBin  string
	WorkDir string // temporary files (default: a new temp dir)
	Logf    func(format string, args ...any)
	// OnInterrupt runs when SIGINT/SIGTERM/SIGHUP aborts the run, after the
	// clean-up and before the process exits (remove the caller's files).
	OnInterrupt func()
}

func goroot() string { return runtime.GOROOT() }

// Harness is one run.
type Harness struct {
	o    Options
	rng  *rand.Rand
	net  network
	reps []*replica
	db   *sql.DB
	fc   *fence.SQL
	hc   *http.Client
	end  time.Time

	// paused[i] is closed when replica i resumes after a pause; nil while
	// it runs.
	pmu    sync.Mutex
	paused []chan struct{}
	down   []atomic.Bool
	// holding[c] is the replica index of client c while it holds a lease
	// and has not written yet, else -1.
	holding []atomic.Int32

	mu     sync.Mutex
	h      *chaos.History
	nextOp int
	// oldTerms[i]: when replica i was stopped gracefully while it ran the
	// previous release, whose stop ended every lease of its clients then
	// (noteTerm).
	oldTerms [][]int64
	probes   int
	// relays carry every Raft/RPC connection to each replica (network
	// class); tmpfs are the mounted size-limited data dirs (disk class).
	relays    []*relay
	tmpfs     []string
	diskExits map[int]int
	strangers int
}

func now() int64 { return time.Now().UnixNano() }

func (x *Harness) logf(format string, args ...any) {
	if x.o.Logf != nil {
		x.o.Logf(format, args...)
	}
}

// Run performs one multi-process run and returns its history (to be checked
// with chaos.Check) and the directory holding its logs and database.
func Run(ctx context.Context, o Options) (h *chaos.History, workDir string, err error) {
	if o.Replicas == 0 {
		o.Replicas = 3
	}
	if o.ClientsPerReplica == 0 {
		o.ClientsPerReplica = 2
	}
	if o.Locks == 0 {
		o.Locks = 3
	}
	if o.Timing == "" {
		o.Timing = "test"
	}
	if o.TTL == 0 {
		o.TTL = 2 * time.Second
	}
	if o.Class == "" {
		o.Class = "mixed"
	}
	unlock, err := runLock()
	if err != nil {
		return nil, "", err
	}
	defer unlock()

	if o.WorkDir == "" {
		if o.WorkDir, err = os.MkdirTemp("", "raftlock-chaos-proc-"); err != nil {
			return nil, "", err
		}
	}
	x := &Harness{
		o:   o,
		rng: rand.New(rand.NewPCG(uint64(o.Seed), 0xbb67ae85)),
		h: &chaos.History{
			Layer: "multi-process", Class: o.Class, Seed: o.Seed, Nodes: o.Replicas, TTL: int64(o.TTL), Faults: map[string]int{},
		},
		diskExits: map[int]int{},
		paused:    make([]chan struct{}, o.Replicas),
		oldTerms:  make([][]int64, o.Replicas),
		down:      make([]atomic.Bool, o.Replicas),
		holding:   make([]atomic.Int32, o.Replicas*o.ClientsPerReplica),
	}
	for i := range x.holding {
		x.holding[i].Store(-1)
	}
	// Clean-up on every path, also when the test binary is interrupted.
	sigs := make(chan os.Signal, 1)
	signalNotify(sigs)
	stopSignals := make(chan struct{})
	var cleanOnce sync.Once
	cleanup := func() {
		cleanOnce.Do(func() {
			for _, r := range x.reps {
				r.stop(syscall.SIGKILL, 5*time.Second) // SIGCONT first, inside stop
			}
			for _, rl := range x.relays {
				rl.close()
			}
			for _, d := range x.tmpfs {
				if err := unmountTmpfs(d); err != nil {
					x.logf("tmpfs clean-up: %v", err)
				}
			}
			if x.db != nil {
				x.db.Close()
			}
			if x.net != nil {
				if err := x.net.Close(); err != nil {
					x.logf("network clean-up: %v", err)
				}
			}
			if x.hc != nil {
				x.hc.CloseIdleConnections()
			}
		})
	}
	go func() {
		select {
		case s := <-sigs:
			x.logf("signal %v: cleaning up", s)
			cleanup()
			os.RemoveAll(o.WorkDir)
			if o.OnInterrupt != nil {
				o.OnInterrupt()
			}
			os.Exit(2)
		case <-stopSignals:
		}
	}()
	defer func() {
		signalStop(sigs)
		close(stopSignals)
		cleanup()
	}()

	setupStart := time.Now()
	if err := x.setupNetwork(); err != nil {
		return nil, o.WorkDir, err
	}
	x.h.Notes = append(x.h.Notes, "partition mechanism: "+x.net.Mode())
	if o.Bin == "" {
		if o.Bin, err = buildReplica(ctx, o.Root, o.WorkDir, false); err != nil {
			return nil, o.WorkDir, err
		}
	}
	if err := x.openDB(ctx); err != nil {
		return nil, o.WorkDir, err
	}
	x.hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}}
	if err := x.startReplicas(ctx); err != nil {
		return nil, o.WorkDir, err
	}
	if err := x.waitReady(ctx, 90*time.Second); err != nil {
		return nil, o.WorkDir, err
	}
	x.logf("%d replicas ready in %v (%s); workload for %v", o.Replicas, time.Since(setupStart).Round(time.Millisecond), x.net.Mode(), o.Duration)

	x.h.Start = now()
	x.end = time.Now().Add(o.Duration)
	var wg sync.WaitGroup
	for c := range len(x.holding) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x.client(ctx, c)
		}()
	}
	x.nemesis(ctx)
	x.healAll()
	wg.Wait()
	x.h.End = now()
	x.logf("workload over (clients done %v after its end); settling", time.Since(x.end).Round(time.Millisecond))
	if err := x.waitReady(ctx, 90*time.Second); err != nil {
		x.logf("after healing: %v", err)
	}
	x.resumeProbes(ctx)
	x.captureEndState(ctx)
	if err := x.finish(ctx); err != nil {
		x.h.HarnessErrors = append(x.h.HarnessErrors, err.Error())
	}
	return x.h, o.WorkDir, nil
}

// scanLog finds what must never appear in a replica's output: data races
// (race-built replicas), panics, fatal runtime errors.
func scanLog(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		for _, bad := range []string{"WARNING: DATA RACE", "panic: ", "fatal error: "} {
			if strings.Contains(line, bad) && len(out) < 5 {
				out = append(out, strings.TrimSpace(line))
			}
		}
	}
	return out
}

func (x *Harness) setupNetwork() error {
	mode := x.o.Net
	if mode == "" {
		mode = "auto"
	}
	ok, why := netnsAvailable()
	if mode == "netns" && !ok {
		return fmt.Errorf("network namespaces unavailable: %s", why)
	}
	if mode == "loopback" || !ok {
		if ok {
			why = "loopback chosen"
		}
		x.net = newLoopback(24000+100*x.rng.IntN(300), why)
		return nil
	}
	if removed := cleanupLeftovers(); len(removed) > 0 {
		x.h.Notes = append(x.h.Notes, "removed leftovers of an earlier run: "+strings.Join(removed, ", "))
	}
	id := fmt.Sprintf("%04x", x.rng.IntN(1<<16))
	nn, err := newNetns(x.o.Replicas, id)
	if err != nil {
		return err
	}
	x.net = nn
	return nil
}

func (x *Harness) openDB(ctx context.Context) error {
	path := filepath.Join(x.o.WorkDir, "resource.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)")
	if err != nil {
		return err
	}
	x.db = db
	x.fc = &fence.SQL{DB: db}
	if err := x.fc.CreateTable(ctx); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, `CREATE TABLE writes (id INTEGER PRIMARY KEY AUTOINCREMENT, resource TEXT NOT NULL, token INTEGER NOT NULL, value TEXT NOT NULL)`)
	return err
}

func (x *Harness) startReplicas(ctx context.Context) error {
	n := x.o.Replicas
	for i := range n {
		var join []string
		for j := range n {
			if j != i {
				join = append(join, fmt.Sprintf("%s:%d", x.net.Host(j), x.net.Port(j, 1)))
			}
		}
		r := &replica{
			i: i, id: fmt.Sprintf("r%d", i+1), bin: x.o.Bin, net: x.net,
			dataDir: filepath.Join(x.o.WorkDir, fmt.Sprintf("r%d", i+1)),
			logPath: filepath.Join(x.o.WorkDir, fmt.Sprintf("r%d.log", i+1)),
		}
		if x.o.Class == "upgrade" {
			r.bin = x.o.OldBin
		}
		if x.o.Class == "disk" {
			if err := mountTmpfs(r.dataDir); err != nil {
				return fmt.Errorf("disk class: %w", err)
			}
			x.tmpfs = append(x.tmpfs, r.dataDir)
		}
		r.args = []string{
			"-id", r.id, "-data-dir", r.dataDir,
			"-bind", fmt.Sprintf("%s:%d", x.net.Host(i), x.net.Port(i, 0)),
			"-gossip", fmt.Sprintf("%s:%d", x.net.Host(i), x.net.Port(i, 1)),
			"-join", strings.Join(join, ","),
			"-bootstrap-expect", fmt.Sprint(n),
			"-http", r.httpAddr(),
			"-ttl", x.o.TTL.String(),
			"-timing", x.o.Timing,
			"-log-level", "warn",
		}
		if x.o.Class == "stranger" {
			if i == 0 {
				if err := writeCerts(x.o.WorkDir, n); err != nil {
					return err
				}
			}
			extra, err := strangerArgs(x.o.WorkDir, i)
			if err != nil {
				return err
			}
			r.args = append(r.args, extra...)
		}
		if x.o.Class == "network" {
			target := fmt.Sprintf("%s:%d", x.net.Host(i), x.net.Port(i, 0))
			rl, err := newRelay(fmt.Sprintf("%s:%d", x.net.RelayHost(), relayPort(x.net, i)), target, uint64(x.o.Seed)+uint64(i), x.net.Source)
			if err != nil {
				return fmt.Errorf("network class: relay for %s: %w", r.id, err)
			}
			x.relays = append(x.relays, rl)
			r.args = append(r.args, "-advertise", rl.addr())
		}
		x.reps = append(x.reps, r)
	}
	for _, r := range x.reps {
		if err := r.start(); err != nil {
			return err
		}
	}
	return nil
}
