package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

// The operator class (issue 45): an operator's actions — backups, restores
// of a backup taken earlier in the run, revocations of exclusive and
// shared grants (readers, semaphore permits), ends of sessions, Raft
// snapshots — issued under faults: on a leader cut off from its quorum,
// through a follower whose reply is lost once the leader has processed
// the call (a connection reset), through a follower whose conversation the
// network delivers again later (memnet.Tap), right after the leader
// crashed, on a follower cut off. Besides, the two shapes of issue 45 items
// 4 and 5: a holder whose lease lapses on its client first (its node cut
// off until then), its session having a lock-delay; and a TryRLock or
// TryAcquire through a follower that commits but whose answer is lost, the
// follower cut off while the leader compacts its log (a snapshot) so that
// it installs the leader's snapshot on heal. The workload takes shared
// grants too (sharedWorker).
//
// What must hold (besides every shared check): replicas agree (a backup's
// digest is a sample of its index); no replica is left wedged (catch-up
// probes after each episode); a restore installs at most once per call,
// never when it was not proposed, exactly once when it succeeded; a revoke
// ends one grant, an end-session one session; tokens are never reused, a
// restore included; client validity windows overlap only where an
// operator's action ended the older one first (the documented exception);
// a lapse keeps the lock-delay; an acquisition its owner does not know is
// released once the cluster heals.
func init() {
	register(&faultClass{
		name: "operator",
		shape: func(cfg *simConfig) {
			cfg.LockDelay = time.Second
			cfg.SharedClients = cfg.Nodes
		},
		options: func(s *sim, o *clustertest.Options) {
			o.Configure = func(i int, c *node.Config) {
				// Raft snapshots only when the operator takes one (a
				// replica wedged on a hole in the log stays wedged:
				// compaction past the hole would hide it), and few trailing
				// entries after it (a replica cut off while one is taken
				// needs the snapshot).
				c.SnapshotThreshold = 1 << 14
				c.TrailingLogs = 16
			}
		},
		nemesis: operatorNemesis,
	})
	ciDuration["operator"] = 20 * time.Second
}

func operatorNemesis(s *sim) {
	if s.sleepUntilEnd(s.cfg.TTL) {
		s.backupOn(s.rng.IntN(s.c.Size()), "plain")
	}
	for s.sleepUntilEnd(s.gap()) {
		switch k := s.rng.IntN(100); {
		case k < 10:
			s.operatorStep(ActBackup)
		case k < 32:
			s.operatorStep(ActRestore)
		case k < 50:
			s.operatorStep(ActRevoke)
		case k < 60:
			s.operatorStep(ActEndSession)
		case k < 64:
			s.operatorStep(ActSnapshot)
		case k < 74:
			s.lapse()
		case k < 84:
			s.lostAnswer()
		default:
			s.mixedStep(s.rng.IntN(100))
		}
	}
}

// operatorStep issues one operator action of kind under a fault drawn
// from the seed, heals, and probes that no replica is left wedged.
func (s *sim) operatorStep(kind string) {
	mode := []string{"plain", "isolated-leader", "lost-reply", "replayed", "leader-crashed", "cut-follower"}[s.rng.IntN(6)]
	var call func(i int, via string) error
	var processed func(l *node.Node) bool
	switch kind {
	case ActBackup:
		call = func(i int, via string) error { s.backupOn(i, via); return nil }
	case ActSnapshot:
		call = func(i int, via string) error { return s.snapshotOn(i, via) }
	case ActRestore:
		s.mu.Lock()
		n := len(s.backups)
		s.mu.Unlock()
		if n == 0 {
			return
		}
		k := s.rng.IntN(n)
		installs := s.col.installCount()
		call = func(i int, via string) error { return s.restoreOn(i, via, k) }
		processed = func(*node.Node) bool { return s.col.installCount() > installs }
	case ActRevoke:
		g, ok := s.pickGrant()
		if !ok {
			return
		}
		call = func(i int, via string) error { return s.revokeOn(i, via, g) }
		processed = func(l *node.Node) bool {
			li, _ := l.Lock(g.lock)
			if li.Held && li.Holder.Token == g.token {
				return false
			}
			for _, h := range li.Shared {
				if h.Token == g.token {
					return false
				}
			}
			return true
		}
	case ActEndSession:
		id, ok := s.pickSession()
		if !ok {
			return
		}
		call = func(i int, via string) error { return s.endSessionOn(i, via, id) }
		processed = func(l *node.Node) bool { _, ok := l.Session(id); return !ok }
	}
	if processed == nil && (mode == "lost-reply" || mode == "replayed") {
		mode = "plain" // a backup or a snapshot changes nothing to redo
	}
	s.deliver(kind, mode, call, processed)
	s.c.Heal()
	s.net.ClearFlows()
	s.catchUp(kind + " " + mode)
}

// deliver makes the call under the fault mode names.
func (s *sim) deliver(kind, mode string, call func(i int, via string) error, processed func(l *node.Node) bool) {
	l, ok := s.leader()
	if !ok {
		if run := s.others(); len(run) > 0 {
			call(run[s.rng.IntN(len(run))], "no-leader")
		}
		return
	}
	fs := s.others(l)
	if len(fs) == 0 {
		call(l, mode)
		return
	}
	f := fs[s.rng.IntN(len(fs))]
	switch mode {
	case "plain":
		if s.rng.IntN(2) == 0 {
			f = l
		}
		call(f, mode)
	case "isolated-leader", "cut-follower":
		// A leader cut off while it still leads (its leader lease has
		// not run out): the call reaches it before it steps down.
		i := l
		if mode == "cut-follower" {
			i = f
		}
		s.c.Isolate(i)
		done := s.faultCut("operator-"+mode, kind+" on "+s.c.ID(i), []int{i})
		call(i, mode)
		s.c.Heal()
		done()
	case "leader-crashed":
		done := s.faultCut("operator-leader-crashed", kind+" on "+s.c.ID(f)+", "+s.c.ID(l)+" crashed", []int{l})
		s.crash(l)
		call(f, mode)
		if !s.gone(l) {
			s.restart(l)
		}
		done()
	case "lost-reply":
		s.lostReply(kind, f, l, call, processed)
	case "replayed":
		s.replayedCall(kind, f, l, call)
	}
}

// lostReply calls through follower f while the leader l's replies to f
// are late (on every connection from f to l, those dialed meanwhile too),
// and resets f's connections to l once l has processed the call
// (processed): the reply is lost, and f sends the call again.
func (s *sim) lostReply(kind string, f, l int, call func(i int, via string) error, processed func(l *node.Node) bool) {
	ln, fn := s.c.Nodes[l], s.c.Nodes[f]
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.TTL)
	err := fn.Sync(ctx) // f has RPC connections to l
	cancel()
	if err != nil {
		call(f, "plain")
		return
	}
	done := s.fault("operator-lost-reply", kind+" through "+s.c.ID(f)+" to "+s.c.ID(l))
	defer done()
	rpc := memnet.FlowFilter{From: s.c.RaftHost(f), To: s.c.RaftHost(l), Preface: prefaceRPC}
	late := s.cfg.TTL / 2
	delayed := map[uint64]bool{}
	delay := func() {
		for _, fl := range s.net.Flows(rpc) {
			if !delayed[fl.ID] {
				delayed[fl.ID] = true
				s.net.DelayFlow(fl.ID, memnet.Backward, late)
			}
		}
	}
	delay()
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		call(f, "lost-reply")
	}()
	for !processed(ln) {
		select {
		case <-returned:
			s.net.ClearFlows()
			return
		case <-time.After(time.Millisecond):
			delay()
		}
	}
	for _, fl := range s.net.Flows(rpc) {
		s.net.ResetFlow(fl.ID)
	}
	s.net.ClearFlows()
	<-returned
}

// replayedCall calls through follower f with f's fresh connections to the
// leader l recorded, and later sends each recorded conversation again
// (see replayForward): the network delivers the call twice.
func (s *sim) replayedCall(kind string, f, l int, call func(i int, via string) error) {
	from, to := s.c.RaftHost(f), s.c.RaftHost(l)
	late := s.forwardTimeout() + s.cfg.TTL/2 + time.Duration(s.rng.Int64N(int64(s.cfg.TTL)))
	done := s.fault("operator-replayed", fmt.Sprintf("%s through %s to %s, sent again %v later", kind, s.c.ID(f), s.c.ID(l), late))
	defer done()
	tap := s.tapForward(from, to)
	call(f, "replayed")
	tap.Stop()
	recs := tap.Recordings()
	time.Sleep(late)
	s.replayRecorded(fmt.Sprintf("%s %s→%s", kind, s.c.ID(f), s.c.ID(l)), tap, recs)
}

// pickGrant picks a grant of the leader's lock table to revoke: an
// exclusive, a read or a semaphore grant (drawn first), else any.
func (s *sim) pickGrant() (revocable, bool) {
	l, ok := s.leader()
	if !ok {
		return revocable{}, false
	}
	gs := s.grants(l)
	if len(gs) == 0 {
		return revocable{}, false
	}
	kind := func(g revocable) int {
		switch {
		case g.permits > 0:
			return 2
		case g.shared:
			return 1
		}
		return 0
	}
	want := s.rng.IntN(3)
	var of []revocable
	for _, g := range gs {
		if kind(g) == want {
			of = append(of, g)
		}
	}
	if len(of) == 0 {
		of = gs
	}
	return of[s.rng.IntN(len(of))], true
}

// pickSession picks a worker's live session to end.
func (s *sim) pickSession() (lockinfo.SessionID, bool) {
	var live []lockinfo.SessionID
	for w := range s.current {
		if sess := s.current[w].Load(); sess != nil && sess.Err() == nil {
			live = append(live, lockinfo.SessionID(sess.ID()))
		}
	}
	if len(live) == 0 {
		return 0, false
	}
	return live[s.rng.IntN(len(live))], true
}

// lapse is issue 45 item 4's shape: a worker that holds a lock through a
// follower stops renewing — its node is cut off — until its lease has
// lapsed on its client (which is before the leader expires the session),
// and the node is back at once: the client's library ends the session
// then, before the leader's expiry. The session has a lock-delay, which a
// lapse must keep whoever notices it first.
func (s *sim) lapse() {
	l, ok := s.leader()
	if !ok {
		return
	}
	w, f := -1, -1
	for i := range s.cfg.Clients {
		if n := int(s.holding[i].Load()); n >= 0 && n != l {
			w, f = i, n
			break
		}
	}
	if w < 0 {
		return
	}
	sess := s.current[w].Load()
	if sess == nil || sess.Err() != nil {
		return
	}
	s.c.Isolate(f)
	done := s.faultCut("lapse", s.c.ID(f), []int{f})
	for until := time.Now().Add(3 * s.cfg.TTL); sess.Err() == nil && time.Now().Before(until); {
		time.Sleep(max(time.Until(sess.ValidUntil()), 0) + time.Millisecond)
	}
	s.c.Heal()
	done()
}

// keeper returns the operator's long-lived session on node i (opened on
// first use), or nil.
func (s *sim) keeper(i int) *lockapi.Session {
	n := s.c.Nodes[i]
	if n == nil {
		return nil
	}
	if k := s.keepers[i]; k != nil && k.Err() == nil && k.Node() == n {
		return k
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.TTL)
	defer cancel()
	k, err := lockapi.NewSession(ctx, n, lockapi.WithTTL(s.cfg.TTL), lockapi.WithOwner(fmt.Sprintf("keeper-%d", i)))
	if err != nil {
		return nil
	}
	s.keepers[i] = k
	s.mu.Lock()
	s.sessions = append(s.sessions, k) // open to the end, as the workers' are
	s.mu.Unlock()
	return k
}

// lostAnswer is issue 45 item 5's shape: a keeper's TryRLock or
// TryAcquire through a follower f commits, but the leader's bytes to f are
// lost (the answer, and the entry itself): the call fails. f is then cut
// off while the leader's log moves on and the leader takes a snapshot, so
// that f installs the snapshot on heal instead of applying the entry: its
// session resyncs, and must release the grant it does not know.
func (s *sim) lostAnswer() {
	l, f, ok := s.leaderAndFollower()
	if !ok {
		return
	}
	k := s.keeper(f)
	if k == nil {
		return
	}
	read := s.rng.IntN(2) == 0
	done := s.faultCut("lost-answer", fmt.Sprintf("%s, read %v", s.c.ID(f), read), []int{f})
	defer done()
	s.net.Block(s.c.RaftHost(l), s.c.RaftHost(f))
	w := &workerState{id: operatorClient + f, node: f, sess: k}
	op := Op{Client: w.id, Node: s.c.ID(f), Session: uint64(k.ID()), Lock: rwLock, Kind: OpTryReadAcquire, Shared: true}
	if !read {
		op.Kind, op.Lock, op.Shared, op.Permits = OpTrySemAcquire, semName, false, 1
	}
	// The cut lasts about this long (the burst and the snapshot take a few
	// milliseconds): the keeper's session outlives it.
	try := s.cfg.TTL / 4
	ctx, cancel := context.WithTimeout(context.Background(), try)
	op.Invoke = now()
	op.Deadline = op.Invoke + int64(try)
	lease, idx := s.acquire(k, &op, func() (*lockapi.Lease, error) {
		defer cancel()
		if read {
			return k.TryRLock(ctx, rwLock)
		}
		return k.TryAcquire(ctx, lockapi.Semaphore{Name: semName, Limit: semLimit}, 1)
	})
	if lease != nil {
		s.net.Unblock(s.c.RaftHost(l), s.c.RaftHost(f))
		s.release(w, op, idx, lease, watchLease(lease))
		return
	}
	s.c.Isolate(f)
	s.burst(l)
	s.snapshotOn(l, "lost-answer")
	s.c.Heal()
	s.catchUp("lost-answer")
}

// burst moves the leader l's log on by a few dozen entries (more than the
// class's trailing entries): an operator's own session locks and unlocks
// a lock of its own.
func (s *sim) burst(l int) {
	n := s.c.Nodes[l]
	ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.TTL)
	defer cancel()
	sess, err := lockapi.NewSession(ctx, n, lockapi.WithTTL(s.cfg.TTL), lockapi.WithOwner("operator-burst"))
	if err != nil {
		return
	}
	defer s.closeSession(sess, s.cfg.TTL)
	w := &workerState{id: operatorClient, node: l, sess: sess}
	for range 12 {
		op := Op{Client: w.id, Node: s.c.ID(l), Session: uint64(sess.ID()), Kind: OpTryAcquire, Lock: "burst", Invoke: now()}
		op.Deadline = op.Invoke + int64(s.cfg.TTL)
		lease, idx := s.acquire(sess, &op, func() (*lockapi.Lease, error) { return sess.TryLock(ctx, "burst") })
		if lease == nil {
			return
		}
		s.release(w, op, idx, lease, watchLease(lease))
	}
}
