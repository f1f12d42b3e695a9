package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
)

// apply proposes a command and returns its result once the command is
// committed and applied on this node (read-your-writes: the local FSM, and
// therefore subscriptions on this node, already reflect it). It is propose
// followed by waitApplied (replica.Replica's Apply).
//
// On the leader the command joins the next group-commit batch; on a follower
// it is forwarded (batched) to the leader. While no leader is known, or the
// leader cannot commit, apply retries with jittered backoff until ctx ends;
// it then returns an error wrapping ErrNoQuorum and ctx.Err() — and also
// ErrNotProposed if no attempt can have reached a leader's log (the command
// can never commit). Every retry sends the very same command: with request
// numbers (Seq, see fsm) a command executes at most once however often it
// is delivered; without them Acquire and Release are idempotent on (lock,
// owner), and a retried OpenSession may leave an unused session behind,
// which expires by its TTL. While the cluster version is 1 (a rolling
// upgrade from the previous release) request numbers are dropped before the
// command is written: exactly-once is off until every server supports it.
//
// Business outcomes (locked, not holder, no session, stale, quota) are in
// the Result, not the error. Leader-only commands (fsmwire.Op.LeaderOnly) are
// refused with ErrInvalidArgument, as are commands that fail Validate and a
// nil ctx. A halted node (its state machine met an unknown version) fails
// with ErrHalted.
func (n *Node) apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	if err := checkCtx(ctx); err != nil {
		return fsm.Result{}, err
	}
	res, index, err := n.propose(ctx, cmd)
	if err != nil {
		return res, err
	}
	if err := n.waitApplied(ctx, index); err != nil {
		return res, fmt.Errorf("node: committed at index %d but not yet applied here: %w", index, err)
	}
	return res, nil
}

// propose (replica.Replica's Propose) is apply without the wait for the
// local FSM: it returns the result and the log index of the command as soon
// as the leader has committed and applied it. A follower learns of the commit a moment later (with the
// leader's next message); until then its local reads and events do not yet
// show the command. Use it on hot paths that need only the result (lockapi
// does, for acquire and release), and waitApplied where the local view must
// include the command.
func (n *Node) propose(ctx context.Context, cmd fsm.Command) (fsm.Result, uint64, error) {
	if err := checkCtx(ctx); err != nil {
		return fsm.Result{}, 0, err
	}
	if err := checkClientCommand(cmd); err != nil {
		return fsm.Result{}, 0, err
	}
	if err := ctx.Err(); err != nil {
		return fsm.Result{}, 0, fmt.Errorf("%w: %w", ErrNotProposed, err)
	}
	if err := n.versionGate(ctx, cmd); err != nil { // version_gate.go
		return fsm.Result{}, 0, err
	}
	var out outcome
	err := n.retry(ctx, true, func(ctx context.Context) error {
		out = n.route(ctx, cmd)
		return out.err
	})
	if err != nil {
		return fsm.Result{}, 0, err
	}
	return out.result(), out.index, nil
}

// checkClientCommand refuses, before anything is proposed, a command that
// a client (propose, or a forwarded request) may not send: nil, reserved to
// the leader, or with invalid arguments.
func checkClientCommand(cmd fsm.Command) error {
	switch {
	case cmd == nil:
		return fmt.Errorf("%w: nil command", ErrInvalidArgument)
	case fsm.OpOf(cmd).LeaderOnly():
		return fmt.Errorf("%w: %s is proposed by the leader only", ErrInvalidArgument, fsm.OpOf(cmd))
	}
	if err := fsm.Validate(cmd); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return nil
}

// waitApplied waits until the local FSM has applied the log index (as
// returned by propose), or ctx ends.
func (n *Node) waitApplied(ctx context.Context, index uint64) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	return n.awaitApplied(ctx, index)
}

// checkCtx refuses a nil context at the API boundary (it would panic in a
// node goroutine).
func checkCtx(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return nil
}

// appliedIndex returns the index of the last entry the local FSM applied.
func (n *Node) appliedIndex() uint64 { return n.applied.get() }

// route makes one attempt through the proposer (leader) or the forwarder.
// On a follower with no forward waiting, the caller sends its own forward
// (runInline; its RPC ends with the caller's ctx). On the leader the
// command always goes through a batch goroutine: a commit cannot be
// abandoned half-way, and the caller must be free to return when its ctx
// ends.
func (n *Node) route(ctx context.Context, cmd fsm.Command) outcome {
	p := newProposal(ctx, cmd)
	if n.raft.State() == raft.Leader {
		n.proposer.submit(p)
	} else {
		n.forwarder.runInline([]*proposal{p}, func(batch []*proposal) { n.forwardWithin(ctx, batch) })
	}
	return p.wait()
}

// proposeAsLeader proposes through this node's group commit without
// forwarding or retrying (the session expiry's own commands).
func (n *Node) proposeAsLeader(ctx context.Context, cmd fsm.Command) outcome {
	if err := n.haltErr(); err != nil {
		return outcome{err: err}
	}
	if err := versionRefusal(cmd, n.fsm.ClusterVersion()); err != nil {
		return outcome{err: err}
	}
	p := newProposal(ctx, cmd)
	n.proposer.submit(p)
	return p.wait()
}

// commit is the leader's batch: one log entry stamped with the leader's
// time, carrying every command of the batch in the form the cluster version
// allows (see fsm.Downgrade): an old replica must be able to read it.
func (n *Node) commit(batch []*proposal) {
	if batch = n.takeRestores(batch); len(batch) == 0 {
		return // admin.go: a restore runs between two entries
	}
	v := n.fsm.ClusterVersion()
	cmds := make([]fsm.Command, 0, len(batch))
	kept := make([]*proposal, 0, len(batch))
	for _, p := range batch {
		if err := versionRefusal(p.cmd, v); err != nil {
			p.finish(outcome{err: err})
			continue
		}
		cmds = append(cmds, n.stamp(fsm.Downgrade(p.cmd, v), p.from, v))
		kept = append(kept, p)
	}
	if batch = kept; len(batch) == 0 {
		return
	}
	fail := func(err error) { failAll(batch, err) }
	n.announcer.noteHomes(batch) // before the entry: a later entry may hand one of them a grant
	data, err := fsm.EncodeEntry(fsm.Entry{At: n.wallNow().UnixNano(), Commands: cmds})
	if err != nil {
		fail(fmt.Errorf("%w: %w", ErrInvalidArgument, err))
		return
	}
	start := time.Now()
	f := n.raft.Apply(data, n.cfg.AttemptTimeout)
	err = f.Error()
	n.metrics.observeCommit(time.Since(start), len(batch), err)
	if err != nil {
		fail(raftErr(err))
		return
	}
	resp, ok := f.Response().(*fsm.Response)
	switch {
	case ok && resp.Err != nil && errors.Is(resp.Err, fsm.ErrHalted):
		fail(fmt.Errorf("%w: %w", ErrHalted, resp.Err))
		return
	case !ok || resp.Err != nil || len(resp.Results) != len(batch):
		fail(fmt.Errorf("node: unexpected apply response %#v", f.Response()))
		return
	}
	if onlyNoops(cmds) {
		n.nudges.committedNoops(f.Index())
	} else {
		n.nudges.committed(f.Index()) // flush the commit index once the log goes quiet
	}
	for i, p := range batch {
		n.metrics.countQuota(resp.Results[i])
		p.finish(outcome{res: &resp.Results[i], index: f.Index()})
	}
	n.announcer.announce() // the hand-offs this entry made, if any
}

// versionRefusal refuses a command that the cluster version cannot carry
// even downgraded (a version-2 leader command at version 1).
func versionRefusal(cmd fsm.Command, clusterVersion uint64) error {
	if need := fsm.NeedsVersion(fsm.Downgrade(cmd, clusterVersion)); need > clusterVersion {
		return fmt.Errorf("%w: %s needs cluster version %d (the cluster is at %d)", ErrInvalidArgument, fsm.OpOf(cmd), need, clusterVersion)
	}
	return nil
}

// forward is a follower's batch: one RPC to the leader carrying every
// command of the batch.
func (n *Node) forward(batch []*proposal) { n.forwardWithin(n.ctx, batch) }

// forwardWithin is forward bounded by ctx as well as by the node's life and
// AttemptTimeout: a caller forwarding its own command (runInline) passes
// its ctx. If ctx ends during the call the command may have reached the
// leader: the outcome is unknown, as for a caller that stops waiting for a
// batch that left (proposal.wait).
func (n *Node) forwardWithin(within context.Context, batch []*proposal) {
	fail := func(err error) { failAll(batch, err) }
	addr, id := n.raft.LeaderWithID()
	switch {
	case addr == "":
		fail(errNoLeader)
		return
	case string(id) == n.id.raftID:
		n.proposer.submit(batch...) // became leader meanwhile
		return
	}
	cmds := make([]fsm.Command, len(batch))
	for i, p := range batch {
		cmds[i] = p.cmd
	}
	// The leader of a cluster at version 1 may be of the previous release.
	req, err := forwardRequest(cmds, n.fsm.ClusterVersion())
	if err != nil {
		fail(fmt.Errorf("%w: %w", ErrInvalidArgument, err))
		return
	}
	ctx, cancel := context.WithTimeout(within, n.cfg.AttemptTimeout)
	if within != n.ctx {
		stop := context.AfterFunc(n.ctx, cancel)
		defer stop()
	}
	reply, err := n.trans.Call(ctx, string(addr), req)
	cancel()
	n.metrics.forwards.WithLabelValues(outcomeLabel(err)).Inc()
	if err != nil {
		if cerr := within.Err(); within != n.ctx && cerr != nil {
			fail(errUnknown{cerr})
			return
		}
		fail(fmt.Errorf("%w: forward to %s: %w", errForward, id, err))
		return
	}
	outs, err := decodeApplyReply(reply, len(batch))
	if err != nil {
		fail(fmt.Errorf("%w: reply from %s: %w", errForward, id, err))
		return
	}
	for i, p := range batch {
		p.finish(outs[i])
	}
}

// forwardRequest encodes a follower's batch for the leader in the form the
// cluster version allows (see fsm.Downgrade): at version 1 a leader of the
// previous release must be able to read it.
func forwardRequest(cmds []fsm.Command, clusterVersion uint64) ([]byte, error) {
	out := make([]fsm.Command, len(cmds))
	for i, c := range cmds {
		out[i] = fsm.Downgrade(c, clusterVersion)
	}
	return encodeApplyRequest(out)
}

// wallNow is the leader's wall clock for entry stamps (the WallClock test hook, internal/nodehooks).
func (n *Node) wallNow() time.Time {
	if n.cfg.hooks.WallClock != nil {
		return n.cfg.hooks.WallClock()
	}
	return time.Now()
}

// proposalsInFlight is how many batch entries the leader's proposer has in
// raft at once. One (group commit, see the package doc): with two, raft
// pipelines AppendEntries, each round takes longer (the leader loop stores
// the next batch while it should be committing this one) and the callers
// split into more, smaller cohorts, so fewer proposals commit per second
// (BenchmarkPropose).
const proposalsInFlight = 1

// proposerLinger is the leader proposer's linger, as a fraction of the last
// batch's commit time (see batcher; at most maxLinger). A lone caller never
// waits. The linger must outlast a forwarded caller's way around — the
// answer's trip to its follower, the caller's next command, that
// follower's forward back — or those callers miss the entry and split into
// cohorts. A half packs more commands per entry than a quarter for callers
// spread over the replicas, and Raft has an entry in flight as large a
// share of the time with either (BenchmarkProposeSpread; the bench's
// RAFTLOCK_BENCH_METRICS dumps of the leader show the entry sizes).
const proposerLinger = 0.5

// forwarderLinger is a follower forwarder's linger, as a fraction of the
// last forward's round trip. Without it, callers answered by one forward
// come back one by one and each takes a free forward slot alone, arriving
// at the leader spread out, and a follower's callers complete about half
// as many Lock+Unlock cycles per second (BenchmarkPropose,
// follower/callers=N).
const forwarderLinger = 0.25

// forwardsInFlight is how many forward RPCs a follower runs at once. The
// leader commits one entry at a time (proposalsInFlight), so forwards
// beyond the one waiting for the entry in flight and the one gathering for
// the next only split a follower's callers over more arrivals at the
// leader, some of which miss the next entry (BenchmarkProposeSpread:
// commands per leader entry). One in flight packs as well with callers
// spread over the nodes, but worse when every caller on one follower waits
// for its own apply (BenchmarkPropose, follower/callers=N).
const forwardsInFlight = 2

// failAll finishes every proposal of a batch with err.
func failAll(batch []*proposal, err error) {
	for _, p := range batch {
		p.finish(outcome{err: err})
	}
}
