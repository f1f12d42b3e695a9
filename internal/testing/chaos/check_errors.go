package chaos

import "slices"

// Calls that cannot commit say why, within their deadline: a TryLock made
// entirely inside a quorum loss (every replica cut off from every other),
// or on a replica a partition or a leader isolation cut off from every
// quorum (FaultEvent.Cut),
// fails with an error wrapping ErrNoQuorum (or the session's end), never a
// bare deadline; and no call returns later than its deadline plus a TTL,
// nor more than a TTL after its session ended — plus, when its replica's
// process was paused during the call (a stopped process answers nothing),
// the time the pause overlapped the call.
func (c *checker) checkErrors() {
	inside := func(op *Op) bool {
		for _, f := range c.h.Nemesis {
			if (f.Kind == "quorum-loss" || slices.Contains(f.Cut, op.Node)) && op.Invoke >= f.Start && op.Return <= f.End {
				return true
			}
		}
		return false
	}
	// paused is how long pauses of the call's replica overlapped the call.
	paused := func(op *Op) int64 {
		var d int64
		for _, f := range c.h.Nemesis {
			if (f.Kind == "sigstop" || f.Kind == "pause") && f.Target == op.Node {
				d += max(min(f.End, op.Return)-max(f.Start, op.Invoke), 0)
			}
		}
		return d
	}
	hung, vague := 0, 0
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		if op.Deadline != 0 && c.h.TTL > 0 && op.Return > op.Deadline+c.h.TTL+paused(op) {
			if hung < maxReported {
				c.fail(CheckBoundedCall, op.Lock, "op %d (%s by client %d on %s) returned %s after its deadline (%s)", op.ID, op.Kind, op.Client, op.Node, durationMS(op.Return-op.Deadline), op.Err)
			}
			hung++
		}
		if op.SessionEnded != 0 && c.h.TTL > 0 && op.Return > op.SessionEnded+c.h.TTL+paused(op) {
			if hung < maxReported {
				c.fail(CheckBoundedCall, op.Lock, "op %d (%s by client %d on %s) returned %s after its session ended (%s)", op.ID, op.Kind, op.Client, op.Node, durationMS(op.Return-op.SessionEnded), op.Err)
			}
			hung++
		}
		if op.Kind == OpTryAcquire && op.Result == Fail && op.ErrKind != "" && op.ErrKind != ErrNoQuorum && op.ErrKind != ErrSessionExpired && inside(op) {
			if vague < maxReported {
				c.fail(CheckErrorMeaning, op.Lock, "op %d (try-acquire by client %d on %s), cut off from every quorum, failed with %q (%s), not ErrNoQuorum", op.ID, op.Client, op.Node, op.Err, op.ErrKind)
			}
			vague++
		}
	}
}
