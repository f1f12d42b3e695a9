package node

import "context"

// Leadership: the leader's duties run while this node leads.

// watchLeadership runs the leader's duties (session expiry, membership) for as long as this node leads.
func (n *Node) watchLeadership() {
	defer n.wg.Done()
	var stop func()
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	for {
		select {
		case <-n.ctx.Done():
			return
		case leader := <-n.raft.LeaderCh():
			if stop != nil {
				stop()
				stop = nil
			}
			if !leader {
				n.log.Info("lost leadership")
				continue
			}
			n.log.Info("gained leadership", "term", n.raft.CurrentTerm())
			if h := n.leadingHook.Load(); h != nil {
				(*h)()
			}
			ctx, cancel := context.WithCancel(n.ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				reconciled := make(chan struct{})
				go func() {
					defer close(reconciled)
					n.reconciler.lead(ctx)
				}()
				defer func() { <-reconciled }()
				n.expiry.lead(ctx)
			}()
			stop = func() { cancel(); <-done }
		}
	}
}
