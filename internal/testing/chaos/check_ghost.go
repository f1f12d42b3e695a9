package chaos

// No ghost holders: once the workload has stopped and every client has let
// go of what it held (and the library has had time to clean up), every
// holder and every waiter in the lock table belongs to an acquisition some
// live client still knows. A grant to an owner its client released (a
// delayed duplicate Acquire), to an owner whose Unlock failed and was never
// retried, or to an owner nobody knows, is a ghost: it holds the lock until
// its session ends, which may be never.
func (c *checker) checkGhosts() {
	es := c.h.EndState
	if es == nil {
		return
	}
	c.r.EndHolds = len(es.Holds)
	known := map[string]bool{}
	for _, o := range es.Known {
		known[o] = true
	}
	given := map[string]GivenUp{}
	for _, g := range es.GivenUp {
		given[g.Owner] = g
	}
	byOwner := map[string]*Op{}
	for i := range c.h.Ops {
		if op := &c.h.Ops[i]; op.Owner != "" && op.Result == Granted {
			byOwner[op.Owner] = op
		}
	}
	released := map[string]*Op{}
	for i := range c.h.Ops {
		if op := &c.h.Ops[i]; op.Kind == OpRelease && op.Owner != "" {
			released[op.Owner] = op
		}
	}
	for i, hd := range es.Holds {
		if known[hd.Owner] || i >= maxReported {
			continue
		}
		what := "held"
		if hd.Waiter {
			what = "queued for"
		}
		switch g, ok := given[hd.Owner]; {
		case ok:
			c.fail(CheckGhostHolder, hd.Lock, "%s (session %d, token %d) is %s by owner %s at the end, whose Unlock failed (op %d: %s) and was never retried",
				hd.Lock, hd.Session, hd.Token, what, hd.Owner, g.Op, g.Err)
		case released[hd.Owner] != nil:
			r := released[hd.Owner]
			c.fail(CheckGhostHolder, hd.Lock, "%s (session %d, token %d) is %s by owner %s at the end, which client %d released (op %d, %s, token %d): a released acquisition came back",
				hd.Lock, hd.Session, hd.Token, what, hd.Owner, r.Client, r.ID, r.Result, r.Token)
		case byOwner[hd.Owner] != nil:
			op := byOwner[hd.Owner]
			c.fail(CheckGhostHolder, hd.Lock, "%s (session %d) is %s by owner %s at the end, granted to client %d (op %d) which no longer holds it",
				hd.Lock, hd.Session, what, hd.Owner, op.Client, op.ID)
		default:
			c.fail(CheckGhostHolder, hd.Lock, "%s (session %d, token %d) is %s by owner %s at the end, which no client knows (an abandoned or withdrawn acquisition that was granted later)",
				hd.Lock, hd.Session, hd.Token, what, hd.Owner)
		}
	}
}
