package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/cluster"
	"github.com/raftlock/raftlock/internal/memnet"
	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

// simConfig is one in-process run.
type simConfig struct {
	Seed     int64
	Nodes    int           // 3 or 5
	Clients  int           // workers, spread over the nodes
	Locks    int           // size of the lock set
	Duration time.Duration // workload time (fake)
	TTL      time.Duration // session TTL
	Faults   bool          // nemesis on
	unfenced bool          // self-test: the register admits every write
}

func (c simConfig) String() string {
	return fmt.Sprintf("seed %d: %d nodes, %d clients, %d locks, %v, TTL %v, faults %v", c.Seed, c.Nodes, c.Clients, c.Locks, c.Duration, c.TTL, c.Faults)
}

// sim is the state of one in-process run, inside a synctest bubble.
type sim struct {
	t   *testing.T
	cfg simConfig
	rng *rand.Rand // the nemesis' (test goroutine only)
	net *memnet.Network
	c   *cluster.Cluster
	reg *Register
	col *collector

	nodes  []atomic.Pointer[node.Node] // what workers see; nil while down
	frozen []atomic.Int64              // per node: paused until (UnixNano); 0 = running
	// holding: per worker, the node it runs on while it holds a lease and
	// has not yet written (a target for a pause), else -1.
	holding []atomic.Int32
	end     time.Time

	mu     sync.Mutex
	h      *History
	nextOp int
}

func now() int64 { return time.Now().UnixNano() }

func (s *sim) addOp(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	op.ID = s.nextOp
	s.nextOp++
	s.h.Ops = append(s.h.Ops, op)
	return len(s.h.Ops) - 1
}

func (s *sim) setValidTo(i int, v int64) {
	s.mu.Lock()
	s.h.Ops[i].ValidTo = v
	s.mu.Unlock()
}

func (s *sim) addWrite(w Write) {
	s.mu.Lock()
	s.h.Writes = append(s.h.Writes, w)
	s.mu.Unlock()
}

func (s *sim) note(format string, args ...any) {
	s.mu.Lock()
	s.h.Notes = append(s.h.Notes, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// fault counts a fault and returns a function that records its end.
func (s *sim) fault(kind, target string) func() {
	s.mu.Lock()
	s.h.AddFault(kind)
	s.mu.Unlock()
	start := now()
	return func() {
		s.mu.Lock()
		s.h.Nemesis = append(s.h.Nemesis, FaultEvent{Kind: kind, Target: target, Start: start, End: now()})
		s.mu.Unlock()
	}
}

// runInProcess runs one simulation in a synctest bubble and returns its
// history (checked by the caller, outside the bubble: porcupine's timeout
// needs real time).
func simulate(t *testing.T, cfg simConfig) *History {
	s := &sim{
		t: t, cfg: cfg,
		rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6a09e667)),
		net: memnet.New(),
		reg: NewRegister(),
		h: &History{
			Layer: "in-process", Seed: cfg.Seed, Nodes: cfg.Nodes, TTL: int64(cfg.TTL),
			Faults: map[string]int{},
		},
		nodes:   make([]atomic.Pointer[node.Node], cfg.Nodes),
		frozen:  make([]atomic.Int64, cfg.Nodes),
		holding: make([]atomic.Int32, cfg.Clients),
	}
	s.reg.Unfenced = cfg.unfenced
	s.col = newCollector(s)
	s.c = cluster.Start(t, cluster.Options{Nodes: cfg.Nodes, Net: s.net, Durable: true, Configure: func(i int, c *node.Config) {
		// Snapshots and log compaction happen during the run, so restarts
		// restore from snapshots and lagging followers are sent one.
		c.SnapshotThreshold = 256
		c.TrailingLogs = 64
		c.SnapshotInterval = 500 * time.Millisecond
	}})
	s.c.WaitLeader(30 * time.Second)
	s.c.WaitReady(30 * time.Second)
	for i := range cfg.Nodes {
		s.up(i)
	}
	s.h.Start = now()
	s.end = time.Now().Add(cfg.Duration)
	for i := range s.holding {
		s.holding[i].Store(-1)
	}

	var wg sync.WaitGroup
	for w := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.worker(w)
		}()
	}
	if cfg.Faults {
		s.nemesis()
	} else {
		time.Sleep(time.Until(s.end))
	}
	s.healAll()
	wg.Wait()
	s.h.End = now()
	s.settle()
	s.col.stopAll()
	s.h.Final = s.reg.Final()
	s.h.Log = s.col.events()
	s.h.HarnessErrors = append(s.h.HarnessErrors, s.col.problems()...)
	s.crossCheckDisk()
	return s.h
}

// up publishes node i to the workers and starts observing its events.
func (s *sim) up(i int) {
	n := s.c.Nodes[i]
	s.col.watch(cluster.ID(i), n)
	s.nodes[i].Store(n)
}

// ---- workers ----

type workerState struct {
	id   int
	node int
	rng  *rand.Rand
	sess *lockapi.Session
}

func (s *sim) pausedUntil(node int) time.Time {
	if u := s.frozen[node].Load(); u != 0 {
		return time.Unix(0, u)
	}
	return time.Time{}
}

// freezePoint blocks a worker while its process (node) is paused; it
// reports whether it was paused.
func (s *sim) freezePoint(node int) bool {
	paused := false
	for {
		u := s.pausedUntil(node)
		if u.IsZero() || !time.Now().Before(u) {
			return paused
		}
		paused = true
		time.Sleep(time.Until(u))
	}
}

func (s *sim) worker(id int) {
	w := &workerState{id: id, node: id % s.cfg.Nodes, rng: rand.New(rand.NewPCG(uint64(s.cfg.Seed), uint64(id)+1))}
	defer func() {
		if w.sess != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.TTL)
			w.sess.Close(ctx)
			cancel()
		}
	}()
	locks := make([]string, s.cfg.Locks)
	for i := range locks {
		locks[i] = fmt.Sprintf("lock-%d", i)
	}
	for time.Now().Before(s.end) {
		s.freezePoint(w.node)
		n := s.nodes[w.node].Load()
		if n == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if w.sess == nil || w.sess.Err() != nil || w.sess.Node() != n {
			if w.sess != nil {
				ctx, cancel := context.WithTimeout(context.Background(), s.cfg.TTL)
				w.sess.Close(ctx)
				cancel()
				w.sess = nil
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.TTL)
			sess, err := lockapi.NewSession(ctx, n, lockapi.WithTTL(s.cfg.TTL), lockapi.WithOwner(fmt.Sprintf("client-%d", id)))
			cancel()
			if err != nil {
				time.Sleep(time.Duration(w.rng.Int64N(int64(s.cfg.TTL / 4))))
				continue
			}
			w.sess = sess
		}
		s.cycle(w, locks[w.rng.IntN(len(locks))])
		time.Sleep(time.Duration(w.rng.Int64N(int64(s.cfg.TTL / 8))))
	}
}

// cycle is one lock / fenced write / unlock round.
func (s *sim) cycle(w *workerState, lock string) {
	ttl := s.cfg.TTL
	try := w.rng.Float64() < 0.25
	op := Op{Client: w.id, Node: cluster.ID(w.node), Kind: OpAcquire, Lock: lock}
	if try {
		op.Kind = OpTryAcquire
	}
	ctx, cancel := context.WithTimeout(context.Background(), ttl+time.Duration(w.rng.Int64N(int64(2*ttl))))
	op.Invoke = now()
	var lease *lockapi.Lease
	var err error
	if try {
		lease, err = w.sess.TryLock(ctx, lock)
	} else {
		lease, err = w.sess.Lock(ctx, lock)
	}
	op.Return = now()
	cancel()
	switch {
	case err == nil:
		op.Result, op.Token, op.Owner = Granted, uint64(lease.Token()), lease.Owner().String()
	case errors.Is(err, lockapi.ErrLocked):
		op.Result = Locked
	default:
		op.Result, op.Err = Fail, err.Error()
	}
	idx := s.addOp(op)
	if lease == nil {
		return
	}

	// The client's validity window closes when the lease is lost or
	// released, whichever comes first.
	lost := make(chan int64, 1)
	go func() {
		<-lease.Done()
		lost <- now()
	}()

	s.holding[w.id].Store(int32(w.node))
	time.Sleep(time.Duration(w.rng.Int64N(int64(ttl / 3)))) // think: a pause may hit here
	careful := w.rng.Float64() < 0.5
	if w.rng.Float64() < 0.1 { // a slow worker: past its TTL, keepalives still running
		time.Sleep(time.Duration(w.rng.Int64N(int64(3 * ttl / 2))))
	}
	late := s.freezePoint(w.node) // a paused process resumes here, its old token in hand
	s.holding[w.id].Store(-1)
	// A careful worker checks its lease before writing; a paused one had
	// checked before the pause (that is the point of the pause).
	if late || !careful || lease.Err() == nil {
		for k := range 1 + w.rng.IntN(2) {
			value := fmt.Sprintf("c%d/op%d/%d", w.id, op.ID, k)
			wr := Write{Client: w.id, Lock: lock, Token: op.Token, Value: value, Late: late, Invoke: now()}
			seq, err := s.reg.Write(lock, op.Token, value)
			wr.Return, wr.Seq = now(), seq
			switch {
			case err == nil:
				wr.Accepted = true
			case IsStale(err):
				wr.Rejected = true
			}
			if err != nil {
				wr.Err = err.Error()
			}
			s.addWrite(wr)
			if err != nil {
				break
			}
			time.Sleep(time.Duration(w.rng.Int64N(int64(ttl / 10))))
		}
	}

	rel := Op{Client: w.id, Node: cluster.ID(w.node), Kind: OpRelease, Lock: lock, Token: op.Token, Owner: op.Owner}
	ctx, cancel = context.WithTimeout(context.Background(), 2*ttl)
	rel.Invoke = now()
	err = lease.Unlock(ctx)
	rel.Return = now()
	cancel()
	switch {
	case err == nil:
		rel.Result = OK
	case errors.Is(err, lockapi.ErrNotHolder):
		rel.Result = NotHolder
	default:
		rel.Result = Unknown
	}
	if err != nil {
		rel.Err = err.Error()
	}
	s.addOp(rel)
	s.setValidTo(idx, min(<-lost, rel.Invoke))
}

// ---- nemesis ----

// nemesis injects faults until the end of the workload, one at a time, each
// for a bounded time, then heals.
func (s *sim) nemesis() {
	ttl := s.cfg.TTL
	r := s.rng
	for {
		gap := time.Duration(r.Int64N(int64(ttl)))
		if !time.Now().Add(gap).Before(s.end) {
			time.Sleep(time.Until(s.end))
			return
		}
		time.Sleep(gap)
		hold := ttl/4 + time.Duration(r.Int64N(int64(2*ttl)))
		switch k := r.IntN(100); {
		case k < 12:
			perm := r.Perm(s.cfg.Nodes)
			cut := 1 + r.IntN(s.cfg.Nodes/2) // minority size
			done := s.fault("partition", fmt.Sprint(perm[:cut], perm[cut:]))
			s.c.Partition(perm[:cut], perm[cut:])
			time.Sleep(hold)
			s.c.Heal()
			done()
		case k < 22:
			done := s.fault("isolate-leader", "")
			if l, ok := s.leader(); ok {
				s.c.Isolate(l)
			}
			time.Sleep(hold)
			s.c.Heal()
			done()
		case k < 32:
			done := s.fault("one-way", "")
			a, b := s.pair()
			s.net.Block(cluster.ID(a), cluster.ID(b))
			if r.IntN(2) == 0 { // the leader's outbound links too
				if l, ok := s.leader(); ok && l != a {
					s.net.Block(cluster.ID(l), cluster.ID(a))
				}
			}
			time.Sleep(hold)
			s.c.Heal()
			done()
		case k < 44:
			done := s.fault("delay", "")
			a := r.IntN(s.cfg.Nodes)
			d := time.Duration(1+r.IntN(40)) * time.Millisecond
			for b := range s.cfg.Nodes {
				if b != a {
					s.net.SetDelay(cluster.ID(a), cluster.ID(b), d)
					s.net.SetDelay(cluster.ID(b), cluster.ID(a), d)
				}
			}
			time.Sleep(hold)
			for b := range s.cfg.Nodes {
				s.net.SetDelay(cluster.ID(a), cluster.ID(b), 0)
				s.net.SetDelay(cluster.ID(b), cluster.ID(a), 0)
			}
			done()
		case k < 52:
			done := s.fault("drop-conns", "")
			s.net.DropConns(cluster.ID(r.IntN(s.cfg.Nodes)), "")
			done()
		case k < 64:
			i := r.IntN(s.cfg.Nodes)
			if r.IntN(3) == 0 {
				if l, ok := s.leader(); ok {
					i = l
				}
			}
			done := s.fault("crash-restart", cluster.ID(i))
			s.crash(i)
			time.Sleep(hold)
			s.restart(i)
			done()
		case k < 90:
			// A process pause longer than the TTL (GC, SIGSTOP, VM
			// freeze): the replica and its clients stop; preferably one
			// whose client holds a lease and has not written yet.
			i := r.IntN(s.cfg.Nodes)
			for w := range s.holding {
				if n := s.holding[w].Load(); n >= 0 {
					i = int(n)
					break
				}
			}
			done := s.fault("pause", cluster.ID(i))
			d := ttl + ttl/2 + time.Duration(r.Int64N(int64(2*ttl)))
			s.frozen[i].Store(time.Now().Add(d).UnixNano())
			s.c.Isolate(i)
			time.Sleep(d)
			s.c.Heal()
			s.frozen[i].Store(0)
			done()
		default:
			// Quorum loss for longer than the TTL: no grants, no renewals;
			// every lease ends on its client.
			done := s.fault("quorum-loss", "")
			var groups [][]int
			for i := range s.cfg.Nodes {
				groups = append(groups, []int{i})
			}
			s.c.Partition(groups...)
			time.Sleep(ttl + time.Duration(r.Int64N(int64(2*ttl))))
			s.c.Heal()
			done()
		}
	}
}

func (s *sim) pair() (int, int) {
	a := s.rng.IntN(s.cfg.Nodes)
	b := (a + 1 + s.rng.IntN(s.cfg.Nodes-1)) % s.cfg.Nodes
	return a, b
}

// leader returns the index of a running node that believes it leads.
func (s *sim) leader() (int, bool) {
	for i, n := range s.c.Nodes {
		if n != nil && n.IsLeader() {
			return i, true
		}
	}
	return 0, false
}

func (s *sim) crash(i int) {
	if s.c.Nodes[i] == nil {
		return
	}
	s.nodes[i].Store(nil)
	n := s.c.Nodes[i]
	s.c.Crash(i)
	s.col.stopped(n)
}

func (s *sim) restart(i int) {
	if s.c.Nodes[i] != nil {
		return
	}
	s.c.Restart(i)
	s.up(i)
}

func (s *sim) healAll() {
	s.c.Heal()
	for a := range s.cfg.Nodes {
		for b := range s.cfg.Nodes {
			s.net.SetDelay(cluster.ID(a), cluster.ID(b), 0)
		}
		s.frozen[a].Store(0)
	}
	for i := range s.cfg.Nodes {
		s.restart(i)
	}
}

// settle waits until the healed cluster has one leader and every replica
// has applied the same index, and records their digests.
func (s *sim) settle() {
	s.c.WaitLeader(60 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for attempt := 0; ; attempt++ {
		if attempt == 100 {
			s.h.HarnessErrors = append(s.h.HarnessErrors, "replicas did not reach a common applied index after healing")
			return
		}
		for _, n := range s.c.Nodes {
			if err := n.Sync(ctx); err != nil {
				s.h.HarnessErrors = append(s.h.HarnessErrors, fmt.Sprintf("sync %s after healing: %v", n.ID(), err))
				return
			}
		}
		var ds []Digest
		same := true
		for _, n := range s.c.Nodes {
			i, d := n.Digest()
			ds = append(ds, Digest{Node: n.ID(), Index: i, Hash: fmt.Sprintf("%x", d[:8])})
			same = same && i == ds[0].Index
		}
		if same {
			s.h.Digests = ds
			s.h.LogTokens = uint64(s.c.Nodes[0].Stats().LastToken)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// crossCheckDisk stops every node and reads its log back from its bolt
// store (as the multi-process layer does): the logs must match up to the
// common index, their replay must reach the live digests, and the replayed
// events must be the ones the replicas emitted live.
func (s *sim) crossCheckDisk() {
	if len(s.h.Digests) == 0 {
		return
	}
	upTo := s.h.Digests[0].Index
	for i := range s.c.Nodes {
		s.crash(i)
	}
	live := map[[2]uint64]LogEvent{}
	for _, e := range s.h.Log {
		e.Observed = 0
		live[[2]uint64{e.Index, uint64(e.Seq)}] = e
	}
	var logs []*ReplicaLog
	replayed := 0
	bad := func(format string, args ...any) {
		s.h.HarnessErrors = append(s.h.HarnessErrors, fmt.Sprintf("disk cross-check: "+format, args...))
	}
	for i := range s.c.Nodes {
		rl, err := ReadReplicaLog(cluster.ID(i), s.c.Config(i).DataDir)
		if err != nil {
			bad("%v", err)
			return
		}
		logs = append(logs, rl)
		events, d, _, _, err := rl.Replay(upTo)
		if errors.Is(err, ErrCannotReplay) {
			// A snapshot taken after the common index replaced what it
			// would take: compare the log only.
			s.h.Notes = append(s.h.Notes, "disk cross-check: "+err.Error())
			continue
		}
		if err != nil {
			bad("%v", err)
			return
		}
		if d != s.h.Digests[i] {
			bad("%s replayed from disk to %+v, live digest %+v", rl.Node, d, s.h.Digests[i])
		}
		replayed += len(events)
		for _, e := range events {
			if l, ok := live[[2]uint64{e.Index, uint64(e.Seq)}]; !ok || l != e {
				bad("%s: replayed event %+v, live %+v (%v)", rl.Node, e, l, ok)
				break
			}
		}
	}
	s.h.LogDivergence = append(s.h.LogDivergence, CompareLogs(logs, upTo)...)
	s.h.Notes = append(s.h.Notes, fmt.Sprintf("disk cross-check: %d replicas' logs compared up to index %d; %d events replayed from disk matched the live ones", len(logs), upTo, replayed))
}

// ---- log collection ----

// collector merges the events every replica applies: one event per (index,
// position), the earliest observation time, and any disagreement between
// replicas.
type collector struct {
	s    *sim
	mu   sync.Mutex
	evs  map[[2]uint64]LogEvent
	errs []string
	subs map[*node.Node]*watcher
	wg   sync.WaitGroup
}

type watcher struct {
	sub  *node.Subscription
	stop chan struct{}
}

func newCollector(s *sim) *collector {
	return &collector{s: s, evs: map[[2]uint64]LogEvent{}, subs: map[*node.Node]*watcher{}}
}

func (c *collector) record(nodeID string, le LogEvent, at int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [2]uint64{le.Index, uint64(le.Seq)}
	prev, ok := c.evs[k]
	if !ok {
		le.Observed = at
		c.evs[k] = le
		return
	}
	obs := prev.Observed
	prev.Observed = 0
	if prev != le && len(c.errs) < 20 {
		c.errs = append(c.errs, fmt.Sprintf("replicas disagree on the event at index %d position %d: %+v, and %s applied %+v", le.Index, le.Seq, prev, nodeID, le))
	}
	prev.Observed = min(obs, at)
	c.evs[k] = prev
}

func (c *collector) watch(nodeID string, n *node.Node) {
	sub, err := n.Subscribe(node.EventFilter{All: true}, 1<<16)
	if err != nil {
		c.s.t.Fatalf("subscribe to %s: %v", nodeID, err)
	}
	w := &watcher{sub: sub, stop: make(chan struct{})}
	c.mu.Lock()
	c.subs[n] = w
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		var index uint64
		seq := 0
		handle := func(e fsm.Event) {
			if e.Index == index {
				seq++
			} else {
				index, seq = e.Index, 0
			}
			c.record(nodeID, logEvent(e, seq), now())
		}
		for {
			select {
			case e := <-sub.C:
				handle(e)
			case <-sub.Resync:
				// A snapshot restore (expected: the other replicas saw
				// those entries live) or dropped events (a harness problem:
				// positions within an entry could shift).
				index, seq = 0, 0
			case <-w.stop:
				for {
					select {
					case e := <-sub.C:
						handle(e)
					default:
						sub.Close()
						return
					}
				}
			}
		}
	}()
}

// stopped ends the observation of a node that was shut down (after it
// delivered what it had applied).
func (c *collector) stopped(n *node.Node) {
	c.mu.Lock()
	w := c.subs[n]
	delete(c.subs, n)
	c.mu.Unlock()
	if w != nil {
		close(w.stop)
	}
}

func (c *collector) stopAll() {
	c.mu.Lock()
	subs := c.subs
	c.subs = map[*node.Node]*watcher{}
	c.mu.Unlock()
	for _, w := range subs {
		close(w.stop)
	}
	c.wg.Wait()
}

func (c *collector) events() []LogEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]LogEvent, 0, len(c.evs))
	for _, e := range c.evs {
		out = append(out, e)
	}
	return out
}

func (c *collector) problems() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}
