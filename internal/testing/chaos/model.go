package chaos

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// The porcupine model: one lock (the history is partitioned per lock) whose
// holder is a grant, identified by its fencing token. A grant needs the lock
// free and a token above every earlier one (and, to keep the search small,
// comes right after the next lower token of the history: chainGrants); a release (by its owner, by the
// library's clean-up, by session close or by lease expiry) needs that grant to
// hold; a try-acquire answered "locked" needs some holder; an owner's release
// answered "not holder" needs that grant not to hold.
//
// Lease expiry is not a free, spontaneous step of the model: every expiry is
// an operation of the history, taken from the committed log (the cluster
// decided it), with the real-time window in which it must have committed.
// Operations no client observed — expiries, the library's releases of
// abandoned acquisitions, grants whose caller had given up — are resolved
// through the log the same way (their "request id" is the token or owner id
// in the log). Their windows are derived from the log order, which is the
// commit order: an entry committed no earlier than the leader time (At) and
// the invocation of any client operation matched to an entry at or before it,
// and no later than the observation or client return of any entry at or
// after it.

type lockOpKind uint8

const (
	mGrant lockOpKind = iota + 1
	mRelease
	mReleaseNoop // an owner's release that found it no longer held
	mLocked      // a try-acquire that found the lock held
	// mEnsureReleased: an owner's release acknowledged as done although the
	// log ended the grant otherwise (expiry during the call): legal where the
	// grant no longer holds — the log's own release must come before it.
	mEnsureReleased
	// mHolds: a replica called the grant's lease valid: it holds.
	mHolds
	// mReleaseDelayed: a release (an expiry) that put the lock into
	// lock-delay: until the next grant, "locked" answers are legal on a
	// free lock.
	mReleaseDelayed
	// mRestore: a restore installed a backup (its commit window from the
	// log): the lock's holder becomes the backup's (Token; 0 = free), in
	// lock-delay if the backup's was (Delayed). Tokens granted before stay
	// granted: the next grant still needs a higher one.
	mRestore
)

type lockInput struct {
	Lock  string
	Kind  lockOpKind
	Token uint64
	Desc  string
	// Prev (grants): the next lower token granted on this lock in the
	// history; the grant steps only right after it (see chainGrants).
	Prev uint64
	// Delayed (mRestore): the backup's lock was in lock-delay.
	Delayed bool
}

type lockState struct {
	Holder uint64 // token of the grant holding the lock; 0 = free
	Last   uint64 // highest token granted
	// Delayed: released into lock-delay and not granted since.
	Delayed bool
}

func lockModel() porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var names []string
			for _, op := range history {
				l := op.Input.(lockInput).Lock
				if _, ok := by[l]; !ok {
					names = append(names, l)
				}
				by[l] = append(by[l], op)
			}
			sort.Strings(names)
			out := make([][]porcupine.Operation, 0, len(names))
			for _, n := range names {
				out = append(out, by[n])
			}
			return out
		},
		Init: func() interface{} { return lockState{} },
		Step: func(state, input, _ interface{}) (bool, interface{}) {
			s := state.(lockState)
			in := input.(lockInput)
			switch in.Kind {
			case mGrant:
				if s.Holder == 0 && in.Token > s.Last && s.Last == in.Prev {
					return true, lockState{Holder: in.Token, Last: in.Token}
				}
			case mRelease, mReleaseDelayed:
				if s.Holder == in.Token {
					return true, lockState{Last: s.Last, Delayed: in.Kind == mReleaseDelayed}
				}
			case mReleaseNoop:
				return s.Holder != in.Token, s
			case mHolds:
				return s.Holder == in.Token, s
			case mEnsureReleased:
				if s.Holder == in.Token {
					return false, s // the log's own release event ends it
				}
				return true, s
			case mLocked:
				return s.Holder != 0 || s.Delayed, s
			case mRestore:
				return true, lockState{Holder: in.Token, Last: s.Last, Delayed: in.Delayed}
			}
			return false, s
		},
		Hash: func(state interface{}) uint64 {
			s := state.(lockState)
			h := s.Holder*0x9e3779b97f4a7c15 ^ s.Last
			if s.Delayed {
				h = ^h
			}
			return h
		},
		DescribeOperation: func(input, _ interface{}) string { return input.(lockInput).Desc },
		DescribeState: func(state interface{}) string {
			s := state.(lockState)
			if s.Holder == 0 && s.Delayed {
				return fmt.Sprintf("free, in lock-delay (last token %d)", s.Last)
			}
			if s.Holder == 0 {
				return fmt.Sprintf("free (last token %d)", s.Last)
			}
			return fmt.Sprintf("held by token %d", s.Holder)
		},
	}
}

// bounds computes every log event's commit window from the log order.
func (c *checker) bounds() {
	n := len(c.log)
	lo := make([]int64, n)
	hi := make([]int64, n)
	matched := make([]*Op, n)
	for k, e := range c.log {
		switch {
		case e.Kind == EvGranted:
			matched[k] = c.opGrant[e.Token]
		case e.Kind == EvReleased && e.Reason == "owner":
			matched[k] = c.opRelease[e.Token]
		}
	}
	var run int64 = math64Min
	for k, e := range c.log {
		if !c.h.StampsUnreliable {
			run = max(run, e.At) // committed no earlier than its leader time
		}
		if op := matched[k]; op != nil {
			run = max(run, op.Invoke)
		}
		lo[k] = run
	}
	run = infinity
	for k := n - 1; k >= 0; k-- {
		e := c.log[k]
		if e.Observed != 0 {
			run = min(run, e.Observed)
		}
		if op := matched[k]; op != nil {
			run = min(run, op.Return)
		}
		hi[k] = run
	}
	c.lo, c.hi, c.matched = lo, hi, matched
	c.pos = map[uint64]int{}
	for k, e := range c.log {
		if e.Kind == EvReleased {
			c.pos[e.Token] = k
		}
	}
}

// checkLinearizable builds the per-lock operation history and runs porcupine.
func (c *checker) checkLinearizable() {
	lo, hi, matched := c.lo, c.hi, c.matched
	for k := range c.log {
		if lo[k] > hi[k] {
			e := c.log[k]
			c.fail(CheckLogRealTime, e.Lock, "log index %d (%s token %d) must have committed after %d and before %d: a client operation ordered before it in the log began after one ordered after it had returned", e.Index, e.Kind, e.Token, lo[k], hi[k])
			break
		}
	}

	lanes := 0
	for _, op := range c.h.Ops {
		lanes = max(lanes, op.Client+1)
	}
	var ops []porcupine.Operation
	add := func(client int, in lockInput, call, ret int64) {
		if ret < call {
			ret = call
		}
		ops = append(ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Return: ret})
	}
	locks := map[string]bool{} // the exclusive locks of the history
	for _, op := range c.h.Ops {
		if c.primitive(op.Lock) || !(op.Kind.acquires() || op.Kind == OpRelease || op.Kind == OpLeaseCheck) {
			continue
		}
		locks[op.Lock] = true
		switch {
		case (op.Kind == OpAcquire || op.Kind == OpTryAcquire) && op.Result == Granted:
			add(op.Client, lockInput{Lock: op.Lock, Kind: mGrant, Token: op.Token, Desc: fmt.Sprintf("c%d %s → token %d", op.Client, op.Kind, op.Token)}, op.Invoke, op.Return)
		case op.Kind == OpLeaseCheck && op.Result == Valid && !(c.staleChecks[op.ID] && c.known(CheckStaleValidity)):
			add(op.Client, lockInput{Lock: op.Lock, Kind: mHolds, Token: op.Token, Desc: fmt.Sprintf("c%d lease token %d → valid", op.Client, op.Token)}, op.Invoke, op.Return)
		case op.Kind == OpTryAcquire && op.Result == Locked:
			add(op.Client, lockInput{Lock: op.Lock, Kind: mLocked, Desc: fmt.Sprintf("c%d try-acquire → locked", op.Client)}, op.Invoke, op.Return)
		case op.Kind == OpRelease && (op.Result == OK || op.Result == NotHolder):
			if first := c.opRelease[op.Token]; first != nil && first.ID != op.ID {
				continue // a second attempt: the first one stands for the release
			}
			r, ok := c.releaseOf[op.Token]
			switch {
			case ok && r.Reason == "owner":
				add(op.Client, lockInput{Lock: op.Lock, Kind: mRelease, Token: op.Token, Desc: fmt.Sprintf("c%d release token %d → %s", op.Client, op.Token, op.Result)}, op.Invoke, op.Return)
			case op.Result == OK:
				// Acknowledged, but the log ended the grant otherwise (an
				// expiry during the call: a ghost operation): after the
				// call the grant must not hold.
				add(op.Client, lockInput{Lock: op.Lock, Kind: mEnsureReleased, Token: op.Token, Desc: fmt.Sprintf("c%d release token %d → ok (already ended)", op.Client, op.Token)}, op.Invoke, op.Return)
			default:
				add(op.Client, lockInput{Lock: op.Lock, Kind: mReleaseNoop, Token: op.Token, Desc: fmt.Sprintf("c%d release token %d → not held", op.Client, op.Token)}, op.Invoke, op.Return)
			}
		}
	}
	for _, e := range c.log {
		if e.Lock != "" && !c.primitive(e.Lock) {
			locks[e.Lock] = true
		}
	}
	restored := c.restoredReleases()
	for k, e := range c.log {
		if matched[k] != nil || c.primitive(e.Lock) {
			continue
		}
		switch e.Kind {
		case EvRestored:
			holder, delayed := map[string]uint64{}, map[string]bool{}
			for _, r := range c.installAt[k].restoredHolds() {
				if !r.Waiter && !r.Shared && r.Permits == 0 {
					holder[r.Lock] = r.Token
				}
			}
			if in := c.installAt[k]; in.backup != nil {
				for _, l := range in.backup.Delayed {
					delayed[l] = true
				}
			}
			for l := range locks {
				t := holder[l]
				if t != 0 {
					t = restoredHold(t)
				}
				add(lanes+3, lockInput{Lock: l, Kind: mRestore, Token: t, Delayed: delayed[l], Desc: fmt.Sprintf("log@%d restore: holder token %d", e.Index, holder[l])}, lo[k], hi[k])
			}
		case EvGranted:
			c.r.GhostOps++
			add(lanes, lockInput{Lock: e.Lock, Kind: mGrant, Token: e.Token, Desc: fmt.Sprintf("log@%d grant token %d (no client saw it)", e.Index, e.Token)}, lo[k], hi[k])
		case EvReleased:
			c.r.GhostOps++
			call := lo[k]
			if op := c.unknownRelease(e.Token); op != nil && e.Reason == "owner" {
				call = max(call, op.Invoke)
			}
			lane := lanes + 1
			if e.Reason == "session-expired" {
				lane = lanes + 2
			}
			kind := mRelease
			if e.Delayed {
				kind = mReleaseDelayed
			}
			token, what := e.Token, "release"
			if restored[k] {
				token, what = restoredHold(e.Token), "release of the restored hold"
			}
			add(lane, lockInput{Lock: e.Lock, Kind: kind, Token: token, Desc: fmt.Sprintf("log@%d %s token %d (%s)", e.Index, what, e.Token, e.Reason)}, call, hi[k])
		}
	}
	ops = chainGrants(ops)
	c.r.PorcupineOps = len(ops)
	c.r.ops, c.r.timeout = ops, c.o.PorcupineTimeout
	c.r.model = lockModel()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(c.r.model, ops, c.o.PorcupineTimeout)
	c.r.PorcupineMillis = int(time.Since(start).Milliseconds())
	c.r.Porcupine, c.r.info = res, info
	switch res {
	case porcupine.Illegal:
		c.fail(CheckPorcupine, "", "porcupine: the history is not linearizable for a lock with lease expiry")
	case porcupine.Unknown:
		c.fail(CheckPorcupineUndecided, "", "porcupine: no answer within %v (Unknown is not a pass); %s", c.o.PorcupineTimeout, partitionLoad(c.r.model, ops))
	}
}

const math64Min = -1 << 63

// restoredHold is the model's name of a hold a restore brought back with
// token t: another grant than t's own (another session holds it; a
// release of t's own grant finds it no longer held). Tokens stay far
// below 2^62.
func restoredHold(t uint64) uint64 { return t | 1<<62 }

// restoredReleases returns the positions of the log's releases of holds a
// restore brought back: the first release of a token after an install
// that restored it.
func (c *checker) restoredReleases() map[int]bool {
	out := map[int]bool{}
	live := map[uint64]bool{}
	for k, e := range c.log {
		switch e.Kind {
		case EvRestored:
			clear(live)
			for _, r := range c.installAt[k].restoredHolds() {
				if !r.Waiter {
					live[r.Token] = true
				}
			}
		case EvReleased:
			if live[e.Token] {
				out[k] = true
				delete(live, e.Token)
			}
		}
	}
	return out
}

// unknownRelease returns a client's release of the token whose outcome it
// never learnt, if any.
func (c *checker) unknownRelease(token uint64) *Op {
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		if op.Kind == OpRelease && op.Token == token && op.Result == Unknown {
			return op
		}
	}
	return nil
}

// Visualize writes porcupine's HTML visualisation of the checked history.
func (r *Report) Visualize(w io.Writer) error {
	if r.model.Init == nil {
		return fmt.Errorf("chaos: no linearizability check was run")
	}
	return porcupine.Visualize(r.model, r.info, w)
}

// IllegalLocks returns the locks whose partition porcupine finds not
// linearizable, each within the check's budget (a partition it cannot
// decide in time is not listed).
func (r *Report) IllegalLocks() []string {
	var out []string
	m := lockModel()
	for _, part := range m.Partition(r.ops) {
		if porcupine.CheckOperationsTimeout(m, part, r.timeout) != porcupine.Illegal {
			continue
		}
		out = append(out, part[0].Input.(lockInput).Lock)
	}
	return out
}

// DescribeLock lists the porcupine operations of one lock in call order,
// with times relative to start (ms).
func (r *Report) DescribeLock(lock string, start int64) string {
	var ops []porcupine.Operation
	for _, op := range r.ops {
		if op.Input.(lockInput).Lock == lock {
			ops = append(ops, op)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	var b []byte
	ms := func(t int64) string {
		if t >= infinity {
			return "∞"
		}
		return fmt.Sprintf("%.3f", float64(t-start)/1e6)
	}
	for _, op := range ops {
		b = fmt.Appendf(b, "  [%s, %s] %s\n", ms(op.Call), ms(op.Return), op.Input.(lockInput).Desc)
	}
	return string(b)
}

// FirstIllegalPrefix returns, for one lock, the shortest prefix of its
// operations (in call order) that porcupine finds not linearizable, as a
// description (empty if the whole history is linearizable).
func (r *Report) FirstIllegalPrefix(lock string, start int64, context int) string {
	var ops []porcupine.Operation
	for _, op := range r.ops {
		if op.Input.(lockInput).Lock == lock {
			ops = append(ops, op)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	m := lockModel()
	k := sort.Search(len(ops)+1, func(k int) bool {
		// A prefix is a history of its own: its grants chain among
		// themselves.
		return porcupine.CheckOperationsTimeout(m, chainGrants(ops[:k]), r.timeout) == porcupine.Illegal
	})
	if k > len(ops) {
		return ""
	}
	sub := &Report{ops: ops[max(0, k-context):k]}
	return fmt.Sprintf("first illegal prefix ends with operation %d of %d:\n%s", k, len(ops), sub.DescribeLock(lock, start))
}

// Unplaceable lists the operations without a log event of their own
// (try-acquires answered "locked", releases answered "not holder" or
// acknowledged after an expiry) that fit no state of the lock in the log's
// order within their real-time window: a diagnosis of an Illegal result.
// Locks a restore reset are left out (the log's order of tokens is not
// the order of their states there).
func (r *Report) Unplaceable(h *History) []string {
	// Transitions per lock in log order, with their commit windows.
	type seg struct {
		holder   uint64
		from, to int64 // the state held at some time within [from, to]
	}
	var out []string
	segs := map[string][]seg{}
	byLock := map[string][]porcupine.Operation{}
	for _, op := range r.ops {
		in := op.Input.(lockInput)
		byLock[in.Lock] = append(byLock[in.Lock], op)
	}
	for l, ops := range byLock {
		if slices.ContainsFunc(ops, func(op porcupine.Operation) bool { return op.Input.(lockInput).Kind == mRestore }) {
			continue
		}
		var trans []porcupine.Operation
		for _, op := range ops {
			if k := op.Input.(lockInput).Kind; k == mGrant || k == mRelease || k == mReleaseDelayed {
				trans = append(trans, op)
			}
		}
		// The log's order: tokens increase, a release follows its grant.
		sort.SliceStable(trans, func(i, j int) bool {
			a, b := trans[i].Input.(lockInput), trans[j].Input.(lockInput)
			if a.Token != b.Token {
				return a.Token < b.Token
			}
			return a.Kind == mGrant && (b.Kind == mRelease || b.Kind == mReleaseDelayed)
		})
		var holder uint64
		from := int64(math64Min)
		for _, t := range trans {
			segs[l] = append(segs[l], seg{holder, from, t.Return})
			in := t.Input.(lockInput)
			if in.Kind == mGrant {
				holder = in.Token
			} else {
				holder = 0
			}
			from = t.Call
		}
		segs[l] = append(segs[l], seg{holder, from, infinity})
		for _, op := range ops {
			in := op.Input.(lockInput)
			if in.Kind == mGrant || in.Kind == mRelease || in.Kind == mReleaseDelayed || in.Kind == mRestore {
				continue
			}
			ok := false
			for _, s := range segs[l] {
				if s.from > op.Return || s.to < op.Call {
					continue
				}
				switch in.Kind {
				case mLocked:
					ok = ok || s.holder != 0
				case mReleaseNoop, mEnsureReleased:
					ok = ok || s.holder != in.Token
				case mHolds:
					ok = ok || s.holder == in.Token
				}
			}
			if !ok {
				out = append(out, fmt.Sprintf("%s: [%.3f, %.3f] %s fits no state in the log's order", l, float64(op.Call-h.Start)/1e6, float64(op.Return-h.Start)/1e6, in.Desc))
			}
		}
	}
	return out
}
