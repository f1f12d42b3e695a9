package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/lockapi"
)

// probeClient numbers probe clients apart from the workers.
const probeClient = 1000

// resumeBound is how long after healing a probe may take (fake time).
const resumeBound = 30 * time.Second

// probeBound is how long a probe may take where a class expects the
// cluster to serve during or right after a fault.
const probeBound = 10 * time.Second

// probe is a fresh client on node i: it opens a session, acquires lock
// (waiting), releases it and closes the session, retrying with a new
// session after an error, all within bound. It records the operations and
// the probe, and reports whether it succeeded.
func (s *sim) probe(what string, i int, lock string, bound time.Duration, resume bool) bool {
	p := Probe{What: what, Node: s.c.ID(i), Lock: lock, Start: now(), Resume: resume}
	p.Deadline = p.Start + int64(bound)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	var errs []string
	for {
		err := s.probeOnce(ctx, i, lock)
		if err == nil {
			p.Done = now()
			break
		}
		if len(errs) < 3 {
			errs = append(errs, err.Error())
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.Err = strings.Join(errs, "; ")
	s.mu.Lock()
	s.h.Probes = append(s.h.Probes, p)
	s.mu.Unlock()
	return p.Done != 0
}

// probeOnce is one attempt of a probe.
func (s *sim) probeOnce(ctx context.Context, i int, lock string) error {
	n := s.c.Nodes[i]
	if n == nil {
		return errors.New("node is down")
	}
	s.mu.Lock()
	s.probes++
	client := probeClient + s.probes
	s.mu.Unlock()
	nodeID := s.c.ID(i)
	deadline, _ := ctx.Deadline()
	sess, err := lockapi.NewSession(ctx, n, lockapi.WithTTL(s.cfg.TTL), lockapi.WithOwner(fmt.Sprintf("probe-%d", client)))
	if err != nil {
		return fmt.Errorf("open session: %w", err)
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), s.cfg.TTL)
		sess.Close(cctx)
		ccancel()
	}()
	op := Op{Client: client, Node: nodeID, Kind: OpAcquire, Lock: lock, Invoke: now(), Deadline: deadline.UnixNano()}
	lease, err := sess.Lock(ctx, lock)
	op.Return = now()
	if err != nil {
		op.Result, op.Err, op.ErrKind = Fail, err.Error(), errKind(err)
		s.addOp(op)
		return fmt.Errorf("lock: %w", err)
	}
	op.Result, op.Token, op.Owner = Granted, uint64(lease.Token()), lease.Owner().String()
	rel := Op{Client: client, Node: nodeID, Kind: OpRelease, Lock: lock, Token: op.Token, Owner: op.Owner, Invoke: now(), Deadline: op.Deadline}
	err = lease.Unlock(ctx)
	rel.Return = now()
	op.ValidTo = rel.Invoke
	s.addOp(op)
	if err != nil {
		rel.Result, rel.Err, rel.ErrKind = Unknown, err.Error(), errKind(err)
		s.addOp(rel)
		return fmt.Errorf("unlock: %w", err)
	}
	rel.Result = OK
	s.addOp(rel)
	return nil
}

// probeAny probes through the first of the given nodes that runs.
func (s *sim) probeAny(what string, nodes []int, bound time.Duration) bool {
	for _, i := range nodes {
		if s.c.Nodes[i] != nil {
			return s.probe(what, i, s.probeLock(), bound, false)
		}
	}
	s.mu.Lock()
	s.h.Probes = append(s.h.Probes, Probe{What: what, Node: "none", Start: now(), Deadline: now(), Err: "no node of " + s.ids(nodes) + " runs"})
	s.mu.Unlock()
	return false
}

// probeLock is a fresh lock name for a probe.
func (s *sim) probeLock() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("probe-%d", s.probes+1)
}

// resumeProbes checks that the healed cluster serves: a probe through
// every running node.
func (s *sim) resumeProbes(healed int64) {
	for i := range s.c.Size() {
		if s.c.Nodes[i] == nil {
			continue
		}
		left := resumeBound - time.Duration(now()-healed)
		s.probe("grants resume after the last fault healed", i, fmt.Sprintf("probe-resume-%s", s.c.ID(i)), max(left, probeBound), true)
	}
}

// lockProbes acquires every workload lock once at the end (after the end
// state was read): a lock stuck in lock-delay, or held by a ghost, fails.
func (s *sim) lockProbes() {
	run := s.running()
	if len(run) == 0 {
		return
	}
	var at int
	for i := range s.c.Size() {
		if s.c.Nodes[i] != nil {
			at = i
			break
		}
	}
	for _, l := range s.lockNames() {
		s.probe("workload lock "+l+" can be acquired at the end", at, l, s.cfg.LockDelay+probeBound, false)
	}
}

// quiesce is how long the end state waits for clean-ups after the
// workload: expiries of sessions whose node died, the library's releases
// of abandoned acquisitions and of failed unlocks.
func (s *sim) quiesce() time.Duration { return 3*s.cfg.TTL + s.cfg.LockDelay }

// captureEndState reads the lock table once no client holds anything: the
// workers have stopped (their sessions still open), clean-ups had time.
func (s *sim) captureEndState() {
	time.Sleep(s.quiesce())
	n, err := s.syncedNode(probeBound)
	if err != nil {
		s.note("end state: no synced node: %v", err)
		return
	}
	locks, err := wholeTable(n)
	if err != nil {
		s.note("end state: %v", err)
	}
	es := &EndState{At: now(), Node: n.ID(), Index: replica.Of(n).AppliedIndex(), Holds: tableHolds(locks)}
	s.mu.Lock()
	es.GivenUp = append(es.GivenUp, s.givenUp...)
	for _, sess := range s.sessions {
		if sess.Err() == nil {
			es.Sessions = append(es.Sessions, uint64(sess.ID()))
		}
	}
	s.mu.Unlock()
	sort.Slice(es.Sessions, func(i, j int) bool { return es.Sessions[i] < es.Sessions[j] })
	s.h.EndState = es
}

// crossCheckDisk stops every node and reads its log back from its bolt
// store (as the multi-process layer does): every log's configurations,
// entries and replayed digests go into the history; the logs must match up
// to the common index, their replay must reach the live digests, and the
// replayed events must be the ones the replicas emitted live.
func (s *sim) crossCheckDisk() {
	for i := range s.c.Size() {
		s.stopNode(i, clustertest.Crashed)
	}
	if len(s.h.Digests) == 0 {
		return
	}
	upTo := s.h.Digests[0].Index
	live := map[[2]uint64]LogEvent{}
	for _, e := range s.h.Log {
		e.Observed = 0
		live[[2]uint64{e.Index, uint64(e.Seq)}] = e
	}
	digests := map[string]Digest{}
	for _, d := range s.h.Digests {
		digests[d.Node] = d
	}
	var logs []*ReplicaLog
	replayed := 0
	bad := func(format string, args ...any) {
		s.h.HarnessErrors = append(s.h.HarnessErrors, fmt.Sprintf("disk cross-check: "+format, args...))
	}
	differs := func(format string, args ...any) {
		s.h.Disagreements = append(s.h.Disagreements, fmt.Sprintf("disk cross-check: "+format, args...))
	}
	for i := range s.c.Size() {
		d, ok := digests[s.c.ID(i)]
		if !ok {
			continue // not running at the end
		}
		rl, err := ReadReplicaLog(s.c.ID(i), s.c.DataDir(i))
		if err != nil {
			bad("%v", err)
			return
		}
		logs = append(logs, rl)
		events, rd, _, _, err := rl.Replay(upTo)
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
		if rd != d {
			differs("%s replayed from disk to %+v, live digest %+v", rl.Node, rd, d)
		}
		replayed += len(events)
		for _, e := range events {
			if l, ok := live[[2]uint64{e.Index, uint64(e.Seq)}]; !ok || l != e {
				differs("%s: replayed event %+v, live %+v (%v)", rl.Node, e, l, ok)
				break
			}
		}
	}
	s.h.LogDivergence = append(s.h.LogDivergence, CompareLogs(logs, upTo)...)
	s.h.Notes = append(s.h.Notes, fmt.Sprintf("disk cross-check: %d replicas' logs compared up to index %d; %d events replayed from disk matched the live ones", len(logs), upTo, replayed))
}
