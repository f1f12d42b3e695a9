//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/raftlock/raftlock/admin"
	"github.com/raftlock/raftlock/internal/testing/ports"
	"github.com/raftlock/raftlock/node"
)

// options of a demo run.
type options struct {
	short    bool
	jsonPath string
	keep     bool
	timeout  time.Duration
	out      io.Writer
	exe      string        // the program to re-execute as a replica; default: this one
	tmpRoot  string        // where the data directory is made; default: os.TempDir()
	started  func(pid int) // tests: called with every replica process started
	postgres string        // a PostgreSQL URL: the shared database is a schema there, not a SQLite file
}

// demo is the parent process: it starts the replicas and tells the story.
type demo struct {
	opt     options
	n       *narrator
	dir     string
	procs   []*proc
	clients map[string]*client
	res     *results
	ttl     time.Duration
	timing  node.Timing
	work    time.Duration // how long the workers run in step 1
	after   time.Duration // and after the recovery
	hold    time.Duration // how long the cluster stays without a quorum after the lease ended
	grants  []grantRecord // the parent's own grants (probes through the HTTP API)
	hc      *http.Client
	store   store // the shared database
}

const (
	staleDoc      = "doc:42"
	singletonLock = "job:report"
)

// run runs the whole demo within opt.timeout and always cleans up: every
// replica process is killed (resumed first if frozen) and the data
// directory removed (unless opt.keep).
func run(ctx context.Context, opt options) (err error) {
	if opt.timeout <= 0 {
		opt.timeout = 90 * time.Second
	}
	if opt.exe == "" {
		if opt.exe, err = os.Executable(); err != nil {
			return err
		}
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, opt.timeout)
	defer cancel()
	dir, err := os.MkdirTemp(opt.tmpRoot, "raftlock-demo-")
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer hc.CloseIdleConnections()
	d := &demo{
		opt: opt, dir: dir, clients: map[string]*client{}, hc: hc, store: store{Path: filepath.Join(dir, "demo.db")},
		n:      &narrator{w: opt.out, start: time.Now(), color: isTerminal(opt.out)},
		res:    &results{Short: opt.short},
		ttl:    5 * time.Second,
		timing: node.LANTiming(),
		work:   5 * time.Second, after: 3 * time.Second, hold: 2 * time.Second,
	}
	if opt.short {
		d.work, d.after, d.hold = 2*time.Second, time.Second, time.Second
	}
	defer func() {
		if opt.keep {
			fmt.Fprintf(opt.out, "\ndata, database and replica logs kept in %s\n", dir)
			if d.store.postgres() {
				fmt.Fprintf(opt.out, "PostgreSQL schema %s kept\n", d.store.Schema)
			}
			return
		}
		os.RemoveAll(dir)
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.store.drop(dctx); err != nil {
			fmt.Fprintf(opt.out, "dropping PostgreSQL schema %s: %v\n", d.store.Schema, err)
		}
	}()
	defer d.stopAll() // runs first: no replica outlives the demo, even on panic

	err = d.story(ctx)
	interrupted := false
	switch {
	case err == nil:
	case parent.Err() != nil: // a signal
		err, interrupted = fmt.Errorf("interrupted: %w", context.Cause(parent)), true
	case ctx.Err() != nil:
		err = fmt.Errorf("overall deadline of %v passed: %w", opt.timeout, err)
	}
	d.res.DurationMS = d.n.since().Milliseconds()
	if err != nil {
		d.res.Error = err.Error()
		d.n.bad("FAILED: %v", err)
		if !interrupted {
			d.dumpLogs()
		}
	}
	d.res.OK = err == nil && d.res.allHeld()
	if opt.jsonPath != "" {
		if werr := d.res.write(opt.jsonPath); werr != nil && err == nil {
			err = werr
		}
	}
	if err == nil && !d.res.OK {
		err = errors.New("an invariant check failed")
	}
	return err
}

func (d *demo) stopAll() {
	for _, p := range d.procs {
		p.kill()
	}
}

// dumpLogs prints the end of every replica's log (after a failure).
func (d *demo) dumpLogs() {
	for _, p := range d.procs {
		b, _ := os.ReadFile(p.logPath)
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 25 {
			lines = lines[len(lines)-25:]
		}
		fmt.Fprintf(os.Stderr, "\n--- last lines of %s's log (%s) ---\n%s\n", p.id(), p.logPath, strings.Join(lines, "\n"))
	}
}

func (d *demo) proc(id string) *proc {
	for _, p := range d.procs {
		if p.id() == id {
			return p
		}
	}
	return nil
}

func (d *demo) live() []string {
	var ids []string
	for _, p := range d.procs {
		if p.alive() {
			ids = append(ids, p.id())
		}
	}
	return ids
}

// waitFor polls cond every 50 ms until it holds, ctx ends or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if errors.Is(err, errCrashed) {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if err != nil {
			last = err
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// errCrashed: a replica process exited by itself.
var errCrashed = errors.New("a replica process exited")

func (d *demo) checkCrashed() error {
	for _, p := range d.procs {
		if p.crashed() {
			return fmt.Errorf("%w: %s (see its log)", errCrashed, p.id())
		}
	}
	return nil
}

// agreedLeader returns the leader that every replica in ids reports, and
// that reports itself leader (an error while they disagree).
func (d *demo) agreedLeader(ctx context.Context, ids []string) (admin.StatusJSON, error) {
	var leader string
	var leaderSt admin.StatusJSON
	if err := d.checkCrashed(); err != nil {
		return leaderSt, err
	}
	for _, id := range ids {
		st, err := d.clients[id].status(ctx)
		if err != nil {
			return st, err
		}
		if st.LeaderID == "" || !st.Ready || (leader != "" && st.LeaderID != leader) {
			return st, fmt.Errorf("%s sees leader %q (ready %v)", id, st.LeaderID, st.Ready)
		}
		leader = st.LeaderID
		if id == leader {
			leaderSt = st
		}
	}
	if leaderSt.State != "leader" {
		return leaderSt, fmt.Errorf("leader %q not among %v or not leading yet", leader, ids)
	}
	return leaderSt, nil
}

// currentLeader waits until the replicas in ids agree on a leader (a
// replica just resumed or restarted may not know it yet).
func (d *demo) currentLeader(ctx context.Context, ids []string) (admin.StatusJSON, error) {
	var st admin.StatusJSON
	err := waitFor(ctx, 15*time.Second, "the replicas to agree on a leader", func(ctx context.Context) (bool, error) {
		var err error
		st, err = d.agreedLeader(ctx, ids)
		return err == nil, err
	})
	return st, err
}

// waitCluster waits until every live replica is ready, agrees on the leader
// and sees all three as alive voters.
func (d *demo) waitCluster(ctx context.Context, timeout time.Duration) (admin.StatusJSON, error) {
	var leader admin.StatusJSON
	err := waitFor(ctx, timeout, "a cluster of three voters", func(ctx context.Context) (bool, error) {
		st, err := d.agreedLeader(ctx, d.live())
		if err != nil {
			return false, err
		}
		voters, alive := 0, 0
		for _, s := range st.Servers {
			if s.Role == "voter" {
				voters++
			}
		}
		for _, m := range st.Members {
			if m.State == "alive" {
				alive++
			}
		}
		leader = st
		return voters == 3 && alive == 3, nil
	})
	return leader, err
}

// singletonHolder returns the replica running the singleton job, as
// replica id sees it ("" if nobody), and its token.
func (d *demo) singletonHolder(ctx context.Context, id string) (string, uint64, error) {
	l, err := d.clients[id].lock(ctx, singletonLock)
	if err != nil || l.Holder == nil {
		return "", 0, err
	}
	return strings.TrimPrefix(l.Holder.Description, "singleton@"), l.Holder.Token, nil
}

func (d *demo) recordGrant(replica, lock string, token uint64) {
	d.grants = append(d.grants, grantRecord{Lock: lock, Token: token, Replica: replica, Role: "http", AtNS: time.Now().UnixNano()})
}

// acquireRetry acquires lock through replica id (waiting in the queue),
// retrying while the cluster has no leader, until ctx ends.
func (d *demo) acquireRetry(ctx context.Context, id, lock string) (admin.AcquireResponse, error) {
	for {
		r, err := d.clients[id].acquire(ctx, lock, true, 5*time.Second)
		if err == nil {
			d.recordGrant(id, lock, r.Token)
			return r, nil
		}
		var ae *apiError
		if !errors.As(err, &ae) || (ae.Code != http.StatusServiceUnavailable && ae.Code != http.StatusGatewayTimeout) {
			return r, err
		}
		if ctx.Err() != nil {
			return r, fmt.Errorf("acquire %s on %s: %w (last: %v)", lock, id, ctx.Err(), err)
		}
	}
}

func (d *demo) story(ctx context.Context) error {
	if err := d.setup(ctx); err != nil {
		return err
	}
	for i, step := range []func(context.Context) error{d.step1, d.step2, d.step3, d.step4} {
		if err := step(ctx); err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	return d.step5(ctx)
}

func (d *demo) setup(ctx context.Context) error {
	n := d.n
	fmt.Fprintln(d.opt.out, n.paint(ansiBold, "raftlock demo — three replicas, per-document locks, fencing, failover, quorum loss"))
	n.note("data under %s (removed at the end)", d.dir)
	if d.opt.postgres != "" {
		st, err := newPostgresStore(ctx, d.opt.postgres)
		if err != nil {
			return err
		}
		d.store = st
		n.note("shared database: PostgreSQL, schema %s (dropped at the end)", st.Schema)
	}
	if err := d.store.create(ctx); err != nil {
		return err
	}
	var start time.Time
	var st admin.StatusJSON
	for attempt := 1; ; attempt++ {
		var err error
		start = time.Now()
		if st, err = d.startCluster(ctx); err == nil {
			break
		}
		// Another program may take a port between the choice and the bind.
		if attempt == 3 || !errors.Is(err, errCrashed) || !d.portTaken() {
			return fmt.Errorf("forming the cluster: %w", err)
		}
		n.note("a port was taken meanwhile by another program; starting again on other ports")
		d.stopAll()
		for _, p := range d.procs {
			os.RemoveAll(p.spec.DataDir)
			os.Remove(p.spec.Records)
		}
		d.procs, d.clients = nil, map[string]*client{}
	}
	d.res.Cluster.FormedMS = time.Since(start).Milliseconds()
	d.res.Cluster.Leader = st.ID
	n.good("cluster formed through gossip in %s: leader %s (term %d), voters r1 r2 r3", secs(time.Since(start)), st.ID, st.Term)
	return nil
}

// startCluster starts the three replica processes on free ports and waits
// until they have formed a cluster.
func (d *demo) startCluster(ctx context.Context) (admin.StatusJSON, error) {
	n := d.n
	addrs, err := ports.Free(9)
	if err != nil {
		return admin.StatusJSON{}, err
	}
	for i := range 3 {
		id := fmt.Sprintf("r%d", i+1)
		spec := childSpec{
			ID: id, DataDir: filepath.Join(d.dir, id), Bind: addrs[3*i], Gossip: addrs[3*i+1], HTTP: addrs[3*i+2],
			DB: d.store, Records: filepath.Join(d.dir, id+"-grants.jsonl"),
			TTL: d.ttl, Timing: d.timing, Docs: 8, Workers: 2,
		}
		for j := range 3 {
			if j != i {
				spec.Join = append(spec.Join, addrs[3*j+1])
			}
		}
		d.procs = append(d.procs, &proc{spec: spec, exe: d.opt.exe, logPath: filepath.Join(d.dir, id+".log"), started: d.opt.started})
		d.clients[id] = &client{id: id, base: "http://" + spec.HTTP, hc: d.hc}
	}
	var pids []string
	for _, p := range d.procs {
		if err := p.start(); err != nil {
			return admin.StatusJSON{}, err
		}
		pids = append(pids, fmt.Sprintf("%s pid %d", p.id(), p.cmd.Process.Pid))
	}
	n.say("started 3 replica processes (%s); each knows only the others' gossip addresses, BootstrapExpect=3", strings.Join(pids, ", "))
	n.note("Raft: LAN timing (heartbeat %v, election %v); sessions: TTL %v, keepalive every TTL/3", d.timing.HeartbeatTimeout, d.timing.ElectionTimeout, d.ttl)
	return d.waitCluster(ctx, 30*time.Second)
}

// portTaken reports whether a replica process failed because its address
// was in use.
func (d *demo) portTaken() bool {
	for _, p := range d.procs {
		if b, err := os.ReadFile(p.logPath); err == nil && p.crashed() && strings.Contains(string(b), "address already in use") {
			return true
		}
	}
	return false
}

func (d *demo) step1(ctx context.Context) error {
	n := d.n
	n.step(1, "Workers publish documents; a singleton job runs")
	leader, err := d.currentLeader(ctx, d.live())
	if err != nil {
		return err
	}
	// The singleton campaigns on the leader first, so that step 3 (killing
	// the leader) also shows it moving; the others queue behind it.
	if err := d.clients[leader.ID].singleton(ctx); err != nil {
		return err
	}
	var tok uint64
	if err := waitFor(ctx, 10*time.Second, "the singleton to start", func(ctx context.Context) (bool, error) {
		h, t, err := d.singletonHolder(ctx, leader.ID)
		tok = t
		return h == leader.ID, err
	}); err != nil {
		return err
	}
	for _, id := range d.live() {
		if err := d.clients[id].singleton(ctx); err != nil {
			return err
		}
		if err := d.clients[id].workers(ctx, true); err != nil {
			return err
		}
	}
	db := "SQLite"
	if d.store.postgres() {
		db = "PostgreSQL"
	}
	n.say("every replica runs 2 workers: lock doc:N → render → publish into %s through the fence → unlock", db)
	n.say("singleton %q campaigns on every replica; it runs on %s (token %s), the others wait in its queue", singletonLock, leader.ID, n.tok(tok))
	if !sleepCtx(ctx, d.work) {
		return ctx.Err()
	}
	c, err := d.dbCounts(ctx)
	if err != nil {
		return err
	}
	n.good("%d documents published (%s); highest fencing token so far %s", c.published, c.byReplica(), n.tok(c.maxToken))
	n.good("singleton wrote %d rows, all from %s", c.singletonRows, strings.Join(c.singletonRunners, ", "))
	return nil
}

func (d *demo) step2(ctx context.Context) error {
	n := d.n
	n.step(2, "A frozen lock holder and the fence")
	leader, err := d.currentLeader(ctx, d.live())
	if err != nil {
		return err
	}
	runner, _, _ := d.singletonHolder(ctx, leader.ID)
	// The frozen replica: a follower that does not run the singleton (so
	// that only the document lock is at stake); the taker: another replica.
	var frozen, taker string
	for _, id := range d.live() {
		if id != leader.ID && id != runner && frozen == "" {
			frozen = id
		}
	}
	if frozen == "" {
		frozen = d.live()[0]
	}
	for _, id := range d.live() {
		if id != frozen && (taker == "" || id != leader.ID) {
			taker = id
		}
	}
	fc, tc := d.clients[frozen], d.clients[taker]
	// Neither SQLite nor PostgreSQL times out the open transaction of a
	// frozen process (it would hold the fence row's lock): the frozen
	// replica's other workers finish their documents first.
	if err := fc.workers(ctx, false); err != nil {
		return err
	}
	var acq struct {
		Token uint64 `json:"token"`
	}
	if err := fc.call(ctx, "POST", "/demo/stale/acquire", map[string]string{"doc": staleDoc}, &acq); err != nil {
		return err
	}
	n.say("%s/worker locks %s → token %s and starts rendering  %s", frozen, staleDoc, n.tok(acq.Token), n.paint(ansiDim, "(its other workers paused first)"))
	p := d.proc(frozen)
	if err := p.freeze(); err != nil {
		return err
	}
	frozenAt := time.Now()
	n.warn("SIGSTOP %s: frozen mid-render, like a long GC pause; its session TTL is %v", frozen, d.ttl)
	n.say("%s/worker wants %s too and queues for it", taker, staleDoc)
	var pub struct {
		Token    uint64 `json:"token"`
		WaitedMS int64  `json:"waited_ms"`
		Accepted bool   `json:"accepted"`
		Error    string `json:"error"`
	}
	if err := tc.call(ctx, "POST", "/demo/publish", map[string]any{"doc": staleDoc, "timeout_ms": 30000}, &pub); err != nil {
		return err
	}
	if !pub.Accepted {
		return fmt.Errorf("%s's publish of %s with token %d failed: %s", taker, staleDoc, pub.Token, pub.Error)
	}
	n.good("%s is granted %s after %s (%s's session expired on the cluster): token %s > %s; it publishes",
		taker, staleDoc, secs(time.Duration(pub.WaitedMS)*time.Millisecond), frozen, n.tok(pub.Token), n.tok(acq.Token))
	// Keep it frozen past its TTL, as in the reference's scenario (its
	// session may expire sooner: its last keepalive preceded the freeze).
	if rest := d.ttl + d.ttl/6 - time.Since(frozenAt); rest > 0 && !sleepCtx(ctx, rest) {
		return ctx.Err()
	}
	frozenFor := time.Since(frozenAt)
	if err := p.thaw(); err != nil {
		return err
	}
	n.warn("SIGCONT %s after %s frozen (> TTL %v): its worker finishes rendering and publishes with token %s, without re-checking its lock",
		frozen, secs(frozenFor), d.ttl, n.tok(acq.Token))
	var fin staleResult
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := fc.call(fctx, "POST", "/demo/stale/finish", map[string]string{"doc": staleDoc}, &fin); err != nil {
		return err
	}
	s := &d.res.Stale
	s.Doc, s.Holder, s.NewHolder = staleDoc, frozen, taker
	s.StaleToken, s.NewToken, s.Highest = acq.Token, pub.Token, fin.Highest
	s.Rejected, s.Accepted, s.Error = fin.Rejected, fin.Accepted, fin.Error
	s.FrozenMS, s.TakeoverWaitMS = frozenFor.Milliseconds(), pub.WaitedMS
	if fin.Rejected {
		n.good("the fence REJECTED the stale write: token %s < %s, the highest accepted for %s", n.tok(fin.Token), n.tok(fin.Highest), staleDoc)
	} else {
		n.bad("the stale write with token %s was NOT rejected (accepted=%v, error=%q)", n.tok(fin.Token), fin.Accepted, fin.Error)
	}
	if doc, err := d.document(ctx, staleDoc); err == nil {
		n.say("%s in the database: %q", staleDoc, n.toks(doc))
	}
	if fin.LeaseValidAtWrite {
		n.note("(when it wrote, its lease still looked valid to it: the process had not yet noticed that its deadline")
		n.note(" had passed while it was frozen — a check before the write would not have stopped it; the fence did)")
	} else {
		n.note("(its lease had ended by the time it resumed: a check before writing would have caught it this time,")
		n.note(" but a check and a write are never atomic — a pause can fall between them; the fence's check is in the write)")
	}
	return fc.workers(ctx, true)
}

func (d *demo) step3(ctx context.Context) error {
	n := d.n
	n.step(3, "The Raft leader is killed")
	leader, err := d.currentLeader(ctx, d.live())
	if err != nil {
		return err
	}
	killed := leader.ID
	runner, runnerTok, _ := d.singletonHolder(ctx, killed)
	var survivors []string
	for _, id := range d.live() {
		if id != killed {
			survivors = append(survivors, id)
		}
	}
	n.say("leader is %s (term %d); the singleton runs on %s (token %s)", killed, leader.Term, runner, n.tok(runnerTok))
	d.proc(killed).kill()
	tKill := time.Now()
	n.warn("SIGKILL %s (the Raft leader)", killed)
	probe, err := d.acquireRetry(ctx, survivors[0], "failover:probe")
	if err != nil {
		return err
	}
	failover := time.Since(tKill)
	d.clients[survivors[0]].release(ctx, probe.Handle)
	var newLeader admin.StatusJSON
	if err := waitFor(ctx, 10*time.Second, "a new leader", func(ctx context.Context) (bool, error) {
		st, err := d.agreedLeader(ctx, survivors)
		newLeader = st
		return err == nil, err
	}); err != nil {
		return err
	}
	f := &d.res.Failover
	f.Killed, f.NewLeader, f.FailoverMS, f.ProbeToken = killed, newLeader.ID, failover.Milliseconds(), probe.Token
	n.good("first grant after the kill: %s later, through %s (token %s); new leader %s (term %d)",
		secs(failover), survivors[0], n.tok(probe.Token), newLeader.ID, newLeader.Term)

	f.SingletonFrom = runner
	if runner != killed {
		f.SingletonTo = runner
		n.say("the singleton was not on the leader: it keeps running on %s", runner)
		return nil
	}
	var to string
	var toTok uint64
	if err := waitFor(ctx, 20*time.Second, "the singleton to move", func(ctx context.Context) (bool, error) {
		h, t, err := d.singletonHolder(ctx, survivors[0])
		to, toTok = h, t
		return h != "" && h != killed, err
	}); err != nil {
		return err
	}
	moved := time.Since(tKill)
	f.SingletonTo, f.SingletonMoved, f.SingletonMovedMS = to, true, moved.Milliseconds()
	n.good("the singleton moved from %s (token %s) to %s (token %s), %s after the kill — once the dead runner's session expired",
		runner, n.tok(runnerTok), to, n.tok(toTok), secs(moved))
	return nil
}

func (d *demo) step4(ctx context.Context) error {
	n := d.n
	n.step(4, "Quorum lost, then recovered")
	live := d.live()
	leader, err := d.currentLeader(ctx, live)
	if err != nil {
		return err
	}
	// Keep the replica that runs the singleton (its job must stop too), kill
	// the other one.
	runner, runnerTok, _ := d.singletonHolder(ctx, leader.ID)
	keep, second := "", ""
	for _, id := range live {
		if id == runner {
			keep = id
		}
	}
	for _, id := range live {
		switch {
		case keep == "" && id != leader.ID:
			keep = id
		case id != keep && second == "":
			second = id
		}
	}
	if keep == "" || second == "" {
		return fmt.Errorf("need two live replicas, have %v", live)
	}
	kc := d.clients[keep]
	held, err := kc.acquire(ctx, "report:quarterly", false, 0)
	if err != nil {
		return err
	}
	d.recordGrant(keep, "report:quarterly", held.Token)
	n.say("an HTTP client of %s holds report:quarterly (token %s); the session renews it every %v", keep, n.tok(held.Token), (d.ttl / 3).Round(10*time.Millisecond))

	kaAtKill, err := d.keepalives(ctx, keep)
	if err != nil {
		return err
	}
	d.proc(second).kill()
	tKill := time.Now()
	q := &d.res.NoQuorum
	q.Killed, q.Survivor = second, keep
	role := "a follower"
	if second == leader.ID {
		role = "the leader"
	}
	n.warn("SIGKILL %s (%s): 1 of 3 voters left — no quorum", second, role)

	t0 := time.Now()
	_, err = kc.acquire(ctx, "probe:no-quorum", false, 0)
	tNoQuorum := time.Now()
	var ae *apiError
	switch {
	case err == nil:
		return errors.New("TryLock succeeded without a quorum")
	case errors.As(err, &ae):
		q.TryLockStatus, q.TryLockError = ae.Code, ae.Body.Error
	default:
		return err
	}
	q.TryLockMS = tNoQuorum.Sub(t0).Milliseconds()
	if ae.Body.Error == admin.ErrKindNoQuorum {
		n.good("TryLock through %s → HTTP %d %s after %s: nothing can be granted", keep, ae.Code, ae.Body.Error, secs(tNoQuorum.Sub(t0)))
	} else {
		n.bad("TryLock through %s → HTTP %d %s (expected no_quorum)", keep, ae.Code, ae.Body.Error)
	}
	before, err := kc.stats(ctx)
	if err != nil {
		return err
	}
	kaBefore, err := d.keepalives(ctx, keep)
	if err != nil {
		return err
	}
	var lease admin.LeaseJSON
	if err := kc.call(ctx, "GET", fmt.Sprintf("/v1/lease/wait?handle=%s&timeout_ms=%d", held.Handle, (3*d.ttl).Milliseconds()), nil, &lease); err != nil {
		return err
	}
	ended := time.Since(tKill)
	q.LeaseEnded, q.LeaseEndedAfterMS, q.LeaseError = !lease.Valid, ended.Milliseconds(), lease.Error
	if lease.Valid {
		n.bad("the lease on report:quarterly is still valid %s after quorum was lost", secs(ended))
	} else {
		n.good("the lease on report:quarterly ended %s after quorum was lost (TTL %v): its renewals failed, its deadline passed", secs(ended), d.ttl)
	}
	// Stay without a quorum a little longer, to show that nothing moves.
	if !sleepCtx(ctx, d.hold) {
		return ctx.Err()
	}
	st, err := kc.status(ctx)
	if err != nil {
		return err
	}
	after, err := kc.stats(ctx)
	if err != nil {
		return err
	}
	kaAfter, err := d.keepalives(ctx, keep)
	if err != nil {
		return err
	}
	// Renewals that succeeded after the first refusal (none can), and that
	// failed since the kill (the first ones fail within TTL/3 + TTL/6).
	q.RenewalsOK, q.RenewalsFailed = kaAfter.ok-kaBefore.ok, kaAfter.failed-kaAtKill.failed
	n.say("on %s in the %s since the first refusal: %d grants · %g renewals succeeded · %d acquisitions refused (%g renewals failed since the kill)",
		keep, secs(time.Since(tNoQuorum)), after.Grants-before.Grants, q.RenewalsOK, after.NoQuorum-before.NoQuorum, q.RenewalsFailed)
	if after.SingletonToken == 0 && runner == keep {
		n.say("%s is a %s without a leader; its sessions are %s; its singleton job (token %s) has stopped — it runs nowhere now", keep, st.State, st.Session.State, n.tok(runnerTok))
	} else {
		n.say("%s is a %s without a leader; its sessions are %s", keep, st.State, st.Session.State)
	}

	tRestart := time.Now()
	restarted := []string{d.res.Failover.Killed, second}
	for _, id := range restarted {
		if err := d.proc(id).start(); err != nil {
			return err
		}
	}
	q.NoQuorumFromNS, q.NoQuorumToNS = tNoQuorum.UnixNano(), tRestart.UnixNano()
	n.say("restarting %s and %s from their data directories (same ids, same addresses)", restarted[0], restarted[1])
	rec, err := d.acquireRetry(ctx, keep, "probe:recovered")
	if err != nil {
		return err
	}
	recovery := time.Since(tRestart)
	kc.release(ctx, rec.Handle)
	q.RecoveryMS, q.RecoveryToken = recovery.Milliseconds(), rec.Token
	st3, err := d.waitCluster(ctx, 30*time.Second)
	if err != nil {
		return err
	}
	n.good("recovered: first grant %s after the restart (token %s); leader %s (term %d), three voters again",
		secs(recovery), n.tok(rec.Token), st3.ID, st3.Term)
	for _, id := range restarted {
		if err := d.clients[id].workers(ctx, true); err != nil {
			return err
		}
		if err := d.clients[id].singleton(ctx); err != nil {
			return err
		}
	}
	n.say("workers run on all three replicas again")
	var to string
	var toTok uint64
	if err := waitFor(ctx, 20*time.Second, "the singleton to run again", func(ctx context.Context) (bool, error) {
		h, t, err := d.singletonHolder(ctx, keep)
		if err != nil || h == "" || t <= runnerTok {
			return false, err
		}
		s, err := d.clients[h].stats(ctx)
		to, toTok = h, t
		return err == nil && s.SingletonToken == t, err
	}); err != nil {
		return err
	}
	q.SingletonBackMS = time.Since(tRestart).Milliseconds()
	n.good("the singleton runs again on %s (token %s), %s after the restart — once its lost session had expired", to, n.tok(toTok), secs(time.Since(tRestart)))
	if !sleepCtx(ctx, d.after) {
		return ctx.Err()
	}
	return nil
}

func (d *demo) step5(ctx context.Context) error {
	n := d.n
	n.step(5, "Results")
	for _, id := range d.live() {
		if err := d.clients[id].workers(ctx, false); err != nil {
			return err
		}
	}
	if err := d.collect(ctx); err != nil {
		return err
	}
	d.res.check(&n.tokens)
	n.plain("", d.res.summaryTable(&n.tokens))
	n.plain("", "")
	n.plain("", d.res.locksTable(&n.tokens))
	n.plain("", "")
	for _, inv := range d.res.Invariants {
		if inv.OK {
			n.plain(ansiGreen, "✓ "+inv.Name+" — "+inv.Detail)
		} else {
			n.plain(ansiRed+ansiBold, "✗ "+inv.Name+" — "+inv.Detail)
		}
	}
	fmt.Fprintln(d.opt.out)
	if d.res.allHeld() {
		n.good("all invariants held")
	} else {
		n.bad("an invariant did NOT hold")
	}
	return nil
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

type keepaliveCounts struct{ ok, failed float64 }

// keepalives reads a replica's keepalive counters from its /metrics.
func (d *demo) keepalives(ctx context.Context, id string) (keepaliveCounts, error) {
	var k keepaliveCounts
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", d.clients[id].base+"/metrics", nil)
	if err != nil {
		return k, err
	}
	resp, err := d.clients[id].hc.Do(req)
	if err != nil {
		return k, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return k, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(name, "raftlock_node_keepalives_total{") {
			continue
		}
		var v float64
		fmt.Sscanf(val, "%g", &v)
		if strings.Contains(name, `result="ok"`) {
			k.ok += v
		} else {
			k.failed += v
		}
	}
	return k, nil
}
