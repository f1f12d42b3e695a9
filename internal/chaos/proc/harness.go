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
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	"github.com/raftlock/raftlock/internal/chaos"
	"github.com/raftlock/raftlock/lockapi/fence"
)

// Options configure a run.
type Options struct {
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
	WorkDir           string // temporary files (default: a new temp dir)
	Logf              func(format string, args ...any)
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
	// terminated[i]: when replica i was stopped gracefully (its HTTP
	// session closed: every lease of its clients ended then).
	terminated [][]int64
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
			Layer: "multi-process", Seed: o.Seed, Nodes: o.Replicas, TTL: int64(o.TTL), Faults: map[string]int{},
		},
		paused:     make([]chan struct{}, o.Replicas),
		terminated: make([][]int64, o.Replicas),
		down:       make([]atomic.Bool, o.Replicas),
		holding:    make([]atomic.Int32, o.Replicas*o.ClientsPerReplica),
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
		r.args = []string{
			"-id", r.id, "-data-dir", r.dataDir,
			"-bind", fmt.Sprintf("%s:%d", x.net.Host(i), x.net.Port(i, 0)),
			"-allow-plaintext", // the namespaces' 10.213.x addresses are not loopback
			"-gossip", fmt.Sprintf("%s:%d", x.net.Host(i), x.net.Port(i, 1)),
			"-join", strings.Join(join, ","),
			"-bootstrap-expect", fmt.Sprint(n),
			"-http", r.httpAddr(),
			"-ttl", x.o.TTL.String(),
			"-timing", x.o.Timing,
			"-log-level", "warn",
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

// ---- HTTP ----

type status struct {
	ID           string `json:"id"`
	State        string `json:"state"`
	LeaderID     string `json:"leader_id"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	Ready        bool   `json:"ready"`
	FSM          struct {
		LastToken uint64 `json:"last_token"`
	} `json:"fsm"`
}

type errorBody struct {
	Error  string `json:"error"`
	Detail string `json:"detail"`
}

// call makes one bounded HTTP request; it returns the status code (0 when
// no answer arrived) and decodes a 2xx body into out or an error body.
func (x *Harness) call(ctx context.Context, i int, method, path string, in, out any, timeout time.Duration) (int, errorBody, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+x.reps[i].httpAddr()+path, body)
	if err != nil {
		return 0, errorBody{}, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := x.hc.Do(req)
	if err != nil {
		return 0, errorBody{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var eb errorBody
	if resp.StatusCode/100 == 2 {
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				return resp.StatusCode, eb, fmt.Errorf("decode %s: %w", path, err)
			}
		}
		return resp.StatusCode, eb, nil
	}
	json.Unmarshal(b, &eb)
	return resp.StatusCode, eb, nil
}

func (x *Harness) status(ctx context.Context, i int) (status, error) {
	var st status
	code, eb, err := x.call(ctx, i, "GET", "/v1/status", nil, &st, 2*time.Second)
	if err == nil && code != 200 {
		err = fmt.Errorf("status %d: %s", code, eb.Error)
	}
	return st, err
}

// waitReady waits until every running replica is ready and they agree on
// a leader.
func (x *Harness) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		leaders := map[string]bool{}
		ok := true
		for i, r := range x.reps {
			if r.exited() {
				return fmt.Errorf("%s exited; see %s", r.id, r.logPath)
			}
			st, err := x.status(ctx, i)
			if err != nil || !st.Ready || st.LeaderID == "" {
				ok = false
				last = fmt.Sprintf("%s: %+v %v", r.id, st, err)
				break
			}
			leaders[st.LeaderID] = true
		}
		if ok && len(leaders) == 1 {
			return nil
		}
		if ok {
			last = fmt.Sprintf("leaders %v", leaders)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("replicas not ready within %v: %s", timeout, last)
}

// ---- workload ----

func (x *Harness) addOp(op chaos.Op) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	op.ID = x.nextOp
	x.nextOp++
	x.h.Ops = append(x.h.Ops, op)
	return len(x.h.Ops) - 1
}

func (x *Harness) setValidTo(i int, v int64) {
	x.mu.Lock()
	x.h.Ops[i].ValidTo = v
	x.mu.Unlock()
}

func (x *Harness) addWrite(w chaos.Write) {
	x.mu.Lock()
	x.h.Writes = append(x.h.Writes, w)
	x.mu.Unlock()
}

// fault counts a fault and returns a function that records its end.
func (x *Harness) fault(kind, target string) func() {
	x.mu.Lock()
	x.h.AddFault(kind)
	x.mu.Unlock()
	x.logf("nemesis: %s %s", kind, target)
	start := now()
	return func() {
		x.mu.Lock()
		x.h.Nemesis = append(x.h.Nemesis, chaos.FaultEvent{Kind: kind, Target: target, Start: start, End: now()})
		x.mu.Unlock()
	}
}

// endedBy returns the first graceful stop of replica i within [from, to),
// or to.
func (x *Harness) endedBy(i int, from, to int64) int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, t := range x.terminated[i] {
		if t >= from && t < to {
			return t
		}
	}
	return to
}

// pausedCh returns a channel closed when replica i resumes, or nil if it
// is not paused.
func (x *Harness) pausedCh(i int) chan struct{} {
	x.pmu.Lock()
	defer x.pmu.Unlock()
	return x.paused[i]
}

type acquireResp struct {
	Lock             string `json:"lock"`
	Token            uint64 `json:"token"`
	Handle           string `json:"handle"`
	ValidUntilUnixMS int64  `json:"valid_until_unix_ms"`
}

type leaseResp struct {
	Valid bool   `json:"valid"`
	Error string `json:"error"`
}

// client is one Jepsen client: bound to one replica, it locks, writes
// through the fence into SQLite with its token, and unlocks.
func (x *Harness) client(ctx context.Context, c int) {
	ri := c % x.o.Replicas
	rng := rand.New(rand.NewPCG(uint64(x.o.Seed), uint64(c)+1))
	ttl := x.o.TTL
	node := x.reps[ri].id
	for time.Now().Before(x.end) && ctx.Err() == nil {
		if x.down[ri].Load() {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		lock := fmt.Sprintf("lock-%d", rng.IntN(x.o.Locks))
		wait := rng.Float64() < 0.75
		op := chaos.Op{Client: c, Node: node, Kind: chaos.OpAcquire, Lock: lock}
		if !wait {
			op.Kind = chaos.OpTryAcquire
		}
		timeout := ttl + time.Duration(rng.Int64N(int64(ttl)))
		var ar acquireResp
		op.Invoke = now()
		code, eb, err := x.call(ctx, ri, "POST", "/v1/acquire", map[string]any{"lock": lock, "wait": wait, "timeout_ms": timeout.Milliseconds()}, &ar, timeout+6*ttl)
		op.Return = now()
		switch {
		case err == nil && code == 200:
			op.Result, op.Token = chaos.Granted, ar.Token
		case err == nil && code == 409 && eb.Error == "locked":
			op.Result = chaos.Locked
		default:
			op.Result = chaos.Fail
			op.Err = fmt.Sprintf("%d %s %v", code, eb.Error, err)
		}
		idx := x.addOp(op)
		if op.Result != chaos.Granted {
			time.Sleep(time.Duration(rng.Int64N(int64(ttl / 4))))
			continue
		}
		validTo := time.UnixMilli(ar.ValidUntilUnixMS).UnixNano()

		// Think; a pause of our replica may hit here. A paused replica's
		// client (a thread of that process, in reality) resumes with its
		// old token and writes late.
		x.holding[c].Store(int32(ri))
		time.Sleep(time.Duration(rng.Int64N(int64(ttl / 3))))
		late := false
		if ch := x.pausedCh(ri); ch != nil {
			late = true
			select {
			case <-ch:
			case <-time.After(10 * ttl):
			}
		}
		x.holding[c].Store(-1)
		careful := !late && rng.Float64() < 0.5
		write := true
		if careful || late {
			// A careful client asks whether its lease is still valid; a late
			// one asks too (for the record: a replica just resumed from a
			// pause must not call an expired lease valid) but writes anyway.
			var lr leaseResp
			chk := chaos.Op{Client: c, Node: node, Kind: chaos.OpLeaseCheck, Lock: lock, Token: ar.Token, Invoke: now()}
			code, eb, err := x.call(ctx, ri, "GET", "/v1/lease?handle="+ar.Handle, nil, &lr, 2*ttl)
			chk.Return = now()
			switch {
			case err == nil && code == 200 && lr.Valid:
				chk.Result = chaos.Valid // the checker extends the window to it
			case err == nil && code == 200:
				chk.Result, chk.Err = chaos.NotHolder, lr.Error
				write = late
			default:
				chk.Result, chk.Err = chaos.Unknown, fmt.Sprintf("%d %s %v", code, eb.Error, err)
				write = late
			}
			x.addOp(chk)
		}
		if write {
			for k := range 1 + rng.IntN(2) {
				value := fmt.Sprintf("c%d/op%d/%d", c, op.ID, k)
				w := chaos.Write{Client: c, Lock: lock, Token: ar.Token, Value: value, Late: late, Invoke: now()}
				err := x.fc.Exec(ctx, lock, ar.Token, func(tx *sql.Tx) error {
					_, err := tx.Exec(`INSERT INTO writes (resource, token, value) VALUES (?, ?, ?)`, lock, ar.Token, value)
					return err
				})
				w.Return = now()
				switch {
				case err == nil:
					w.Accepted = true
				case errors.Is(err, fence.ErrStaleToken):
					w.Rejected = true
				}
				if err != nil {
					w.Err = err.Error()
				}
				x.addWrite(w)
				if err != nil {
					break
				}
			}
		}
		rel := chaos.Op{Client: c, Node: node, Kind: chaos.OpRelease, Lock: lock, Token: ar.Token, Invoke: now()}
		code, eb, err = x.call(ctx, ri, "POST", "/v1/release", map[string]string{"handle": ar.Handle}, nil, 4*ttl)
		rel.Return = now()
		switch {
		case err == nil && code == 200:
			rel.Result = chaos.OK
		default:
			// 409 not_holder: the lease had been lost; the replica asks the
			// cluster to release it in the background, so when (or
			// whether) that commits is not known here.
			rel.Result = chaos.Unknown
			rel.Err = fmt.Sprintf("%d %s %v", code, eb.Error, err)
		}
		x.addOp(rel)
		// A graceful stop of the replica closed its HTTP session: the lease
		// ended then (the HTTP client cannot see it; an embedded worker
		// would, through Lease.Done).
		x.setValidTo(idx, x.endedBy(ri, op.Return, min(validTo, rel.Invoke)))
		time.Sleep(time.Duration(rng.Int64N(int64(ttl / 8))))
	}
}

// ---- nemesis ----

func (x *Harness) leader(ctx context.Context) (int, bool) {
	for i, r := range x.reps {
		if x.down[i].Load() || x.pausedCh(i) != nil || !r.running() {
			continue
		}
		if st, err := x.status(ctx, i); err == nil && st.State == "leader" {
			return i, true
		}
	}
	return 0, false
}

func (x *Harness) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// nemesis injects one fault at a time until the end of the workload, each
// bounded in time and undone before the next.
func (x *Harness) nemesis(ctx context.Context) {
	ttl := x.o.TTL
	r := x.rng
	n := x.o.Replicas
	for ctx.Err() == nil {
		gap := ttl/2 + time.Duration(r.Int64N(int64(ttl)))
		if !time.Now().Add(gap).Before(x.end) {
			x.sleep(ctx, time.Until(x.end))
			return
		}
		x.sleep(ctx, gap)
		hold := ttl/2 + time.Duration(r.Int64N(int64(2*ttl)))
		k := r.IntN(100)
		if !x.net.CanPartition() && k >= 60 {
			k = r.IntN(60) // process faults only
		}
		switch {
		case k < 35:
			// A pause longer than the TTL, preferably of a replica whose
			// client holds a lease and has not written yet.
			i := r.IntN(n)
			for c := range x.holding {
				if h := x.holding[c].Load(); h >= 0 {
					i = int(h)
					break
				}
			}
			if x.down[i].Load() {
				continue
			}
			done := x.fault("sigstop", x.reps[i].id)
			d := ttl + ttl/2 + time.Duration(r.Int64N(int64(ttl)))
			ch := make(chan struct{})
			x.pmu.Lock()
			x.paused[i] = ch
			x.pmu.Unlock()
			if err := x.reps[i].pause(); err != nil {
				x.logf("pause r%d: %v", i+1, err)
			}
			x.sleep(ctx, d)
			x.reps[i].resume()
			x.pmu.Lock()
			x.paused[i] = nil
			x.pmu.Unlock()
			close(ch)
			done()
		case k < 50:
			i := r.IntN(n)
			if l, ok := x.leader(ctx); ok && r.IntN(2) == 0 {
				i = l
			}
			done := x.fault("sigkill-restart", x.reps[i].id)
			x.down[i].Store(true)
			x.reps[i].stop(syscall.SIGKILL, 5*time.Second)
			x.sleep(ctx, hold)
			x.restart(i)
			done()
		case k < 60:
			i := r.IntN(n)
			done := x.fault("sigterm-restart", x.reps[i].id)
			x.down[i].Store(true)
			x.mu.Lock()
			x.terminated[i] = append(x.terminated[i], now())
			x.mu.Unlock()
			x.reps[i].stop(syscall.SIGTERM, 10*time.Second)
			x.sleep(ctx, hold/2)
			x.restart(i)
			done()
		case k < 75:
			perm := r.Perm(n)
			cut := 1 + r.IntN(n/2)
			done := x.fault("partition", fmt.Sprintf("%v | %v", x.ids(perm[:cut]), x.ids(perm[cut:])))
			for _, a := range perm[:cut] {
				for _, b := range perm[cut:] {
					x.block(a, b)
					x.block(b, a)
				}
			}
			x.sleep(ctx, hold)
			x.heal()
			done()
		case k < 85:
			l, ok := x.leader(ctx)
			done := x.fault("isolate-leader", x.ids([]int{l}))
			if ok {
				for b := range n {
					if b != l {
						x.block(l, b)
						x.block(b, l)
					}
				}
			}
			x.sleep(ctx, hold)
			x.heal()
			done()
		case k < 93:
			a := r.IntN(n)
			b := (a + 1 + r.IntN(n-1)) % n
			done := x.fault("one-way", fmt.Sprintf("%s→%s", x.reps[a].id, x.reps[b].id))
			x.block(a, b)
			if l, ok := x.leader(ctx); ok && l != a && r.IntN(2) == 0 {
				x.block(l, a)
			}
			x.sleep(ctx, hold)
			x.heal()
			done()
		default:
			done := x.fault("quorum-loss", "all")
			for a := range n {
				for b := range n {
					if a != b {
						x.block(a, b)
					}
				}
			}
			x.sleep(ctx, ttl+time.Duration(r.Int64N(int64(ttl))))
			x.heal()
			done()
		}
	}
}

func (x *Harness) ids(is []int) string {
	var out []string
	for _, i := range is {
		out = append(out, x.reps[i].id)
	}
	return strings.Join(out, ",")
}

func (x *Harness) block(a, b int) {
	if err := x.net.Block(a, b); err != nil {
		x.logf("block r%d→r%d: %v", a+1, b+1, err)
	}
}

func (x *Harness) heal() {
	if err := x.net.Heal(); err != nil {
		x.logf("heal: %v", err)
	}
}

func (x *Harness) restart(i int) {
	if err := x.reps[i].start(); err != nil {
		x.logf("restart r%d: %v", i+1, err)
		x.mu.Lock()
		x.h.HarnessErrors = append(x.h.HarnessErrors, fmt.Sprintf("restart r%d: %v", i+1, err))
		x.mu.Unlock()
		return
	}
	x.down[i].Store(false)
}

// healAll undoes every fault: rules flushed, paused replicas continued,
// stopped ones restarted.
func (x *Harness) healAll() {
	x.heal()
	for i, r := range x.reps {
		if r.running() {
			r.resume()
		} else {
			x.restart(i)
		}
	}
}

// ---- the end: convergence, logs, digests ----

func (x *Harness) finish(ctx context.Context) error {
	if err := x.waitReady(ctx, 90*time.Second); err != nil {
		return fmt.Errorf("after healing: %w", err)
	}
	// Wait until every replica has applied the same index (nothing is
	// proposed any more but expiries and session closes of the past).
	var common uint64
	deadline := time.Now().Add(60 * time.Second)
	for {
		var idx []uint64
		same := true
		for i := range x.reps {
			st, err := x.status(ctx, i)
			if err != nil {
				same = false
				break
			}
			idx = append(idx, st.AppliedIndex)
			same = same && st.AppliedIndex == idx[0] && st.CommitIndex == st.AppliedIndex
		}
		if same && len(idx) == len(x.reps) {
			common = idx[0]
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replicas did not reach a common applied index: %v", idx)
		}
		x.sleep(ctx, 300*time.Millisecond)
	}
	x.logf("converged at index %d", common)
	var stops sync.WaitGroup
	for _, r := range x.reps {
		stops.Add(1)
		go func() {
			defer stops.Done()
			r.stop(syscall.SIGTERM, 15*time.Second)
		}()
	}
	stops.Wait()
	x.logf("replicas stopped")
	for _, r := range x.reps {
		for _, p := range scanLog(r.logPath) {
			x.h.HarnessErrors = append(x.h.HarnessErrors, fmt.Sprintf("%s log: %s", r.id, p))
		}
	}
	// The resource's final state.
	rows, err := x.db.QueryContext(ctx, `SELECT resource, token, value FROM writes ORDER BY id`)
	if err != nil {
		return err
	}
	x.h.Final = map[string][]chaos.Version{}
	for rows.Next() {
		var res, val string
		var tok int64
		if err := rows.Scan(&res, &tok, &val); err != nil {
			rows.Close()
			return err
		}
		x.h.Final[res] = append(x.h.Final[res], chaos.Version{Token: uint64(tok), Value: val})
	}
	rows.Close()

	// The committed log, read back from every replica's data dir.
	var logs []*chaos.ReplicaLog
	for _, r := range x.reps {
		rl, err := chaos.ReadReplicaLog(r.id, r.dataDir)
		if err != nil {
			return err
		}
		logs = append(logs, rl)
	}
	x.h.LogDivergence = chaos.CompareLogs(logs, common)
	for i, rl := range logs {
		events, d, last, complete, err := rl.Replay(common)
		if err != nil {
			return err
		}
		x.h.Digests = append(x.h.Digests, d)
		if i == 0 || (complete && len(events) > len(x.h.Log)) {
			x.h.Log, x.h.LogTokens = events, last
			if !complete {
				x.h.LogTokens = 0 // a snapshot hid the first grants
			}
		}
	}
	return nil
}
