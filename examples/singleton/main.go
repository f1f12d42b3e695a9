// Command singleton runs a leader-style job — a nightly report — on exactly
// one of three replicas at a time with lockapi.RunSingleton, and shows it
// moving when the replica running it crashes:
//
//	go run ./examples/singleton
//
// The three replicas run in this one process for the sake of the example
// (each with its own raftlock node, data directory and loopback port); in a
// real deployment each is a separate process or machine running the same
// code. Every few seconds the replica running the job is crashed (its node
// is killed); the job stops there as soon as its lease is lost, and starts on
// another replica once the cluster has expired the crashed one's session.
// The crashed replica is restarted from its data and campaigns again.
// Every write of the job is fenced with its lease's token.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "singleton:", err)
		os.Exit(1)
	}
}

const jobLock = "tenant:7/nightly-report"

// app is what each replica runs: the singleton campaign for the report.
type app struct {
	id     string
	n      *node.Node
	cancel context.CancelFunc
	done   chan struct{}
}

type example struct {
	out      io.Writer
	start    time.Time
	dir      string
	ttl      time.Duration
	peers    []node.Peer
	reports  fence.Memory // the "report store", fenced by token
	mu       sync.Mutex
	apps     map[string]*app
	runs     []jobRun // every run of the job, in start order
	running  int      // jobs running now (must never exceed 1)
	overlaps int
}

type jobRun struct {
	replica string
	token   uint64
	writes  int
	err     error // why it stopped
	stopped bool
}

func (e *example) logf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(e.out, "[%5.1fs] %s\n", time.Since(e.start).Seconds(), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("singleton", flag.ContinueOnError)
	fs.SetOutput(out)
	handovers := fs.Int("handovers", 2, "crash the replica running the job this many times")
	ttl := fs.Duration("ttl", 5*time.Second, "session TTL: how long a crashed runner's lease outlives it")
	timeout := fs.Duration("timeout", 90*time.Second, "overall deadline")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "raftlock-singleton-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	e := &example{out: out, start: time.Now(), dir: dir, ttl: *ttl, apps: map[string]*app{}}

	// Three replicas of a static cluster on loopback.
	var lns []net.Listener
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		lns = append(lns, ln)
		e.peers = append(e.peers, node.Peer{ID: fmt.Sprintf("r%d", i+1), Addr: ln.Addr().String()})
	}
	defer e.stopAll()
	for i, p := range e.peers {
		if err := e.startApp(ctx, p.ID, lns[i]); err != nil {
			return err
		}
	}
	e.logf("three replicas started; each campaigns for %q with RunSingleton (session TTL %v)", jobLock, e.ttl)

	// Follow the election (as any replica sees it) and crash each new runner.
	el, err := e.election("")
	if err != nil {
		return err
	}
	leader, err := e.waitLeaderAfter(ctx, el, 0)
	if err != nil {
		return err
	}
	for crashed := 0; ; crashed++ {
		e.logf("election: %s leads (token %d)", leader.Description, leader.Token)
		// Let it work a little.
		if !sleepCtx(ctx, time.Second) {
			return ctx.Err()
		}
		if crashed == *handovers {
			break
		}
		victim := leader.Description
		e.logf("crashing %s (its node is killed, no goodbye)", victim)
		t0 := time.Now()
		e.crash(victim)
		if el, err = e.election(victim); err != nil { // a view from a live replica
			return err
		}
		next, err := e.waitLeaderAfter(ctx, el, leader.Token)
		if err != nil {
			return err
		}
		e.logf("the job moved to %s after %.1fs (the crashed runner's session had to expire first)", next.Description, time.Since(t0).Seconds())
		if err := e.restart(ctx, victim); err != nil {
			return err
		}
		e.logf("%s restarted from its data directory and campaigns again", victim)
		leader = next
	}
	// Check what happened (before shutting down, which ends the last run).
	e.mu.Lock()
	runs, overlaps := append([]jobRun(nil), e.runs...), e.overlaps
	e.mu.Unlock()
	e.logf("shutting the replicas down")
	e.stopAll()
	fmt.Fprintf(out, "\nruns of the job:\n")
	var last uint64
	increasing := true
	for i, r := range runs {
		why := "still running (until shutdown)"
		if r.stopped {
			why = "stopped: " + r.err.Error()
		}
		if i > 0 && runs[i-1].replica == r.replica {
			increasing = false // a crashed replica must not keep the job
		}
		fmt.Fprintf(out, "  %s  token %-4d %3d fenced writes  %s\n", r.replica, r.token, r.writes, why)
		increasing = increasing && r.token > last
		last = r.token
	}
	ok := overlaps == 0 && increasing && len(runs) == *handovers+1
	fmt.Fprintf(out, "runs: %d (want %d); overlapping runs: %d; tokens strictly increasing, one replica after another: %v\n",
		len(runs), *handovers+1, overlaps, increasing)
	if !ok {
		return errors.New("the singleton ran more than once at a time, or its tokens did not increase")
	}
	return nil
}

// startApp starts replica id's node (on ln) and its singleton campaign.
func (e *example) startApp(ctx context.Context, id string, ln net.Listener) error {
	cfg := node.DefaultConfig()
	cfg.ID, cfg.DataDir = id, e.dir+"/"+id
	cfg.Listener, cfg.BindAddr = ln, ln.Addr().String()
	cfg.Bootstrap, cfg.Peers = true, e.peers
	n, err := node.Start(ctx, cfg)
	if err != nil {
		return err
	}
	actx, cancel := context.WithCancel(ctx)
	a := &app{id: id, n: n, cancel: cancel, done: make(chan struct{})}
	e.mu.Lock()
	e.apps[id] = a
	e.mu.Unlock()
	go func() {
		defer close(a.done)
		e.campaign(actx, a)
	}()
	return nil
}

// campaign is the code every replica runs: open a session, then
// RunSingleton — which runs the job while this replica holds the lock and
// campaigns again (with a fresh session if needed) after a loss.
func (e *example) campaign(ctx context.Context, a *app) {
	for ctx.Err() == nil {
		sess, err := lockapi.NewSession(ctx, a.n, lockapi.WithTTL(e.ttl), lockapi.WithOwner(a.id))
		if err != nil {
			if errors.Is(err, node.ErrClosed) || !sleepCtx(ctx, 200*time.Millisecond) {
				return
			}
			continue
		}
		lockapi.RunSingleton(ctx, sess, jobLock, func(ctx context.Context, l *lockapi.Lease) error {
			return e.job(ctx, a.id, l)
		})
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		sess.Close(cctx)
		cancel()
	}
}

// job is the singleton's work: it writes a report chunk every 200 ms, each
// write fenced with the lease's token, until its context ends (lease lost,
// or the replica stops).
func (e *example) job(ctx context.Context, id string, l *lockapi.Lease) error {
	e.mu.Lock()
	e.running++
	if e.running > 1 {
		e.overlaps++
	}
	e.runs = append(e.runs, jobRun{replica: id, token: uint64(l.Token())})
	idx := len(e.runs) - 1
	e.mu.Unlock()
	e.logf("%s: report job starts (token %d)", id, l.Token())
	var err error
	t := time.NewTicker(200 * time.Millisecond)
	for err == nil {
		select {
		case <-ctx.Done():
			err = context.Cause(ctx)
		case <-t.C:
			err = e.reports.Do("report:2026-11-30", uint64(l.Token()), func() error { return nil })
			if err == nil {
				e.mu.Lock()
				e.runs[idx].writes++
				e.mu.Unlock()
			}
		}
	}
	t.Stop()
	e.mu.Lock()
	e.running--
	e.runs[idx].err, e.runs[idx].stopped = err, true
	e.mu.Unlock()
	e.logf("%s: report job stops: %v", id, err)
	return err
}

// crash kills a replica's node without a goodbye, as a crash looks to the
// rest of the cluster. The replica's application code goes on for a moment:
// its job must stop by itself, on the loss of its lease. Then the replica is
// shut down.
func (e *example) crash(id string) {
	e.mu.Lock()
	a := e.apps[id]
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodeopts.Kill(ctx, a.n) // a crash: tests and demos only (internal/nodeopts)
	e.waitStopped(ctx, id)
	a.cancel()
	<-a.done
}

// waitStopped waits until no run of the job on replica id is in progress.
func (e *example) waitStopped(ctx context.Context, id string) {
	for {
		e.mu.Lock()
		busy := false
		for _, r := range e.runs {
			busy = busy || (r.replica == id && !r.stopped)
		}
		e.mu.Unlock()
		if !busy || !sleepCtx(ctx, 20*time.Millisecond) {
			return
		}
	}
}

func (e *example) restart(ctx context.Context, id string) error {
	var addr string
	for _, p := range e.peers {
		if p.ID == id {
			addr = p.Addr
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return e.startApp(ctx, id, ln)
}

func (e *example) stopAll() {
	e.mu.Lock()
	apps := e.apps
	e.apps = map[string]*app{}
	e.mu.Unlock()
	for _, a := range apps {
		a.cancel()
	}
	for _, a := range apps {
		<-a.done
	}
	var wg sync.WaitGroup
	for _, a := range apps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			a.n.Close(ctx)
		}()
	}
	wg.Wait()
}

// election returns the view of the job's election from a replica other
// than not.
func (e *example) election(not string) (*lockapi.Election, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.peers {
		if a := e.apps[p.ID]; a != nil && p.ID != not {
			return lockapi.NewElection(a.n, jobLock)
		}
	}
	return nil, errors.New("no replica left")
}

// waitLeaderAfter waits (through Election.Observe, no polling) until the
// job's lock is held with a token greater than token: a grant newer than
// that one. (A replica's view may lag — one restarted from its data replays
// the past — but tokens only grow, so "greater" cannot be a stale view.)
func (e *example) waitLeaderAfter(ctx context.Context, el *lockapi.Election, token lockapi.Token) (lockapi.Leader, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := el.Observe(ctx)
	if err != nil {
		return lockapi.Leader{}, err
	}
	for l := range ch {
		if l.Valid() && l.Token > token {
			return l, nil
		}
	}
	return lockapi.Leader{}, ctx.Err()
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
