package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

// The operator's actions, as the operator class issues them (through a
// node's admin methods, on any replica), and what the history records of
// them (OperatorOp, Backup).

// operatorClient numbers the operator's own lock operations (the burst
// that moves the log on, the keepers' tries) apart from the workers and
// the probes.
const operatorClient = 900

// actTimeout bounds one operator call.
func (s *sim) actTimeout() time.Duration { return 2 * s.cfg.TTL }

// actResult classifies an operator call's error (OperatorOp.Result).
func actResult(err error) string {
	switch {
	case err == nil:
		return ActOK
	case errors.Is(err, node.ErrNotProposed):
		return ActNotProposed
	case errors.Is(err, node.ErrNotHeld), errors.Is(err, node.ErrNoSuchSession), errors.Is(err, node.ErrRefused),
		errors.Is(err, node.ErrInvalidArgument), errors.Is(err, fsmwire.ErrInvalidSnapshot):
		return ActRefused
	}
	return ActUnknown
}

// act runs one operator call on node i (it must run) and records it;
// op says what it is (kind, target). It returns the call's error.
func (s *sim) act(i int, op OperatorOp, call func(ctx context.Context, n *node.Node) error) error {
	n := s.c.Nodes[i]
	if n == nil {
		return node.ErrClosed
	}
	op.Node = s.c.ID(i)
	ctx, cancel := context.WithTimeout(context.Background(), s.actTimeout())
	defer cancel()
	op.Invoke = now()
	op.Deadline = op.Invoke + int64(s.actTimeout())
	err := call(ctx, n)
	op.Return = now()
	op.Result = actResult(err)
	if err != nil {
		op.Err = err.Error()
	}
	s.mu.Lock()
	op.ID = len(s.h.Operator)
	s.h.Operator = append(s.h.Operator, op)
	s.mu.Unlock()
	return err
}

// backupOn takes a backup through node i and records it (History.Backups,
// and its digest as a sample of the state at its index: replicas-agree
// compares it with the replicas').
func (s *sim) backupOn(i int, via string) {
	var data bytes.Buffer
	op := OperatorOp{Kind: ActBackup, Via: via, Backup: -1}
	err := s.act(i, op, func(ctx context.Context, n *node.Node) error {
		_, err := n.Operator().Backup(ctx, &data)
		return err
	})
	if err != nil {
		return
	}
	b, err := readBackup(s.c.ID(i), now(), data.Bytes())
	if err != nil {
		s.harnessError("backup through %s does not read back: %v", s.c.ID(i), err)
		return
	}
	s.mu.Lock()
	s.backups = append(s.backups, data.Bytes())
	s.h.Backups = append(s.h.Backups, b)
	s.h.Operator[len(s.h.Operator)-1].Backup = len(s.h.Backups) - 1
	s.h.AddSamples([]DigestSample{{Node: b.Node, Index: b.Index, Hash: b.Hash, At: b.At, Source: "backup"}})
	s.mu.Unlock()
}

// readBackup reads a backup as a replica would restore it: its index,
// digest, grant counter and lock table.
func readBackup(nodeID string, at int64, data []byte) (Backup, error) {
	f := fsm.New(nil)
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		return Backup{}, err
	}
	idx, d := f.Digest()
	locks, err := wholeTable(f)
	if err != nil {
		return Backup{}, err
	}
	b := Backup{Node: nodeID, At: at, Index: idx, Hash: fmt.Sprintf("%x", d[:8]), LastToken: uint64(f.Stats().LastToken), Holds: tableHolds(locks), Bytes: len(data)}
	for _, l := range locks {
		if l.Delayed {
			b.Delayed = append(b.Delayed, l.Name)
		}
	}
	return b, nil
}

// restoreOn restores backup k through node i.
func (s *sim) restoreOn(i int, via string, k int) error {
	s.mu.Lock()
	data := s.backups[k]
	s.mu.Unlock()
	return s.act(i, OperatorOp{Kind: ActRestore, Via: via, Backup: k}, func(ctx context.Context, n *node.Node) error {
		_, err := n.Operator().Restore(ctx, bytes.NewReader(data))
		return err
	})
}

// revocable is a grant the operator may revoke.
type revocable struct {
	lock    string
	token   lockinfo.Token
	shared  bool
	permits int
}

// grants lists the grants of node i's lock table: exclusive holders,
// readers, semaphore holders.
func (s *sim) grants(i int) []revocable {
	n := s.c.Nodes[i]
	if n == nil {
		return nil
	}
	var out []revocable
	locks, _ := wholeTable(n) // a page that failed offers no target
	for _, l := range locks {
		if l.Held {
			out = append(out, revocable{lock: l.Name, token: l.Holder.Token})
		}
		for _, g := range l.Shared {
			out = append(out, revocable{lock: l.Name, token: g.Token, shared: g.Shared, permits: g.Permits})
		}
	}
	return out
}

// revokeOn revokes g through node i.
func (s *sim) revokeOn(i int, via string, g revocable) error {
	op := OperatorOp{Kind: ActRevoke, Via: via, Lock: g.lock, Token: uint64(g.token), Shared: g.shared, Permits: g.permits, Backup: -1}
	return s.act(i, op, func(ctx context.Context, n *node.Node) error {
		_, err := n.Operator().Revoke(ctx, g.lock, g.token, "chaos", via)
		return err
	})
}

// endSessionOn ends session id through node i.
func (s *sim) endSessionOn(i int, via string, id lockinfo.SessionID) error {
	return s.act(i, OperatorOp{Kind: ActEndSession, Via: via, Session: uint64(id), Backup: -1}, func(ctx context.Context, n *node.Node) error {
		return n.Operator().EndSession(ctx, id, "chaos", via)
	})
}

// snapshotOn has node i take a Raft snapshot now (its log is compacted
// down to its trailing entries: a replica behind them needs the snapshot).
func (s *sim) snapshotOn(i int, via string) error {
	return s.act(i, OperatorOp{Kind: ActSnapshot, Via: via, Backup: -1}, func(ctx context.Context, n *node.Node) error {
		_, err := n.Operator().Snapshot(ctx)
		return err
	})
}

// catchUpBound is how long after an episode healed every replica may take
// to apply the leader's applied index.
const catchUpBound = 5 * time.Second

// catchUp is the no-wedged-replica probe after an episode healed: the
// leader's log is moved on past every index any replica claims to have
// applied (a replica whose applied index stands above the cluster's, as
// after a restore no quorum committed, is then behind), and every running
// replica must apply the leader's applied index within catchUpBound.
func (s *sim) catchUp(what string) {
	cu := CatchUp{What: what, Start: now()}
	cu.Deadline = cu.Start + int64(catchUpBound)
	deadline := time.Unix(0, cu.Deadline)
	defer func() {
		s.mu.Lock()
		s.h.CatchUps = append(s.h.CatchUps, cu)
		s.mu.Unlock()
	}()
	var top uint64
	for _, n := range s.running() {
		top = max(top, replica.Of(n).AppliedIndex())
	}
	var l *node.Node
	for l == nil || replica.Of(l).AppliedIndex() <= top {
		if !time.Now().Before(deadline) {
			cu.Lagging = fmt.Sprintf("the leader's log did not pass index %d: %s", top, s.c.Describe())
			return
		}
		li, ok := s.waitLeader(time.Until(deadline))
		if !ok {
			continue
		}
		l = s.c.Nodes[li]
		ctx, cancel := contextUntil(deadline)
		if sess, err := lockapi.NewSession(ctx, l, lockapi.WithTTL(s.cfg.TTL)); err == nil {
			sess.Close(ctx)
		}
		cancel()
	}
	cu.Leader, cu.Index = l.ID(), replica.Of(l).AppliedIndex()
	for {
		lag := ""
		for _, n := range s.running() {
			if got := replica.Of(n).AppliedIndex(); got < cu.Index {
				lag += fmt.Sprintf("%s applied %d; ", n.ID(), got)
			}
		}
		if lag == "" {
			cu.Done = now()
			return
		}
		if !time.Now().Before(deadline) {
			cu.Lagging = lag + "leader " + cu.Leader
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
