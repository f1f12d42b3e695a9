package cluster

import "sync"

// Every replica process started and not yet reaped, so that KillAll can end
// them on any exit path of the benchmark.
var (
	liveMu sync.Mutex
	live   = map[*Node]struct{}{}
)

func track(n *Node) {
	liveMu.Lock()
	live[n] = struct{}{}
	liveMu.Unlock()
}

func untrack(n *Node) {
	liveMu.Lock()
	delete(live, n)
	liveMu.Unlock()
}

// KillAll kills every replica process still running. Call it on every exit
// path (deferred in main, and on signals).
func KillAll() {
	liveMu.Lock()
	nodes := make([]*Node, 0, len(live))
	for n := range live {
		nodes = append(nodes, n)
	}
	liveMu.Unlock()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(n.Kill)
	}
	wg.Wait()
}
