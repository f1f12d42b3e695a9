package chaos

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/leasetrace"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/node"
)

// ---- log collection ----

// collector merges the events every replica applies: one event per (index,
// position), the earliest observation time, and any disagreement between
// replicas.
type collector struct {
	s    *sim
	mu   sync.Mutex
	evs  map[[2]uint64]LogEvent
	errs []string
	// resyncs are the Resyncs received (History.Resyncs).
	resyncs []Resync
	// installs counts what looks like a restore's install: a restored
	// event seen first, a resync while leading.
	installs int
	// restoredAt: per node, when it applied a restored event.
	restoredAt map[string][]int64
	subs       map[*node.Node]*watcher
	wg         sync.WaitGroup
	// lease: the lease trace of every node (leasetrace).
	lease leasetrace.Recorder
}

type watcher struct {
	sub    *replica.Subscription
	stop   chan struct{}
	detach func() // the node's lease trace
}

func newCollector(s *sim) *collector {
	return &collector{s: s, evs: map[[2]uint64]LogEvent{}, subs: map[*node.Node]*watcher{}}
}

func (c *collector) record(nodeID string, le LogEvent, at int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if le.Kind == EvRestored {
		if c.restoredAt == nil {
			c.restoredAt = map[string][]int64{}
		}
		c.restoredAt[nodeID] = append(c.restoredAt[nodeID], at)
	}
	k := [2]uint64{le.Index, uint64(le.Seq)}
	prev, ok := c.evs[k]
	if !ok {
		le.Observed = at
		c.evs[k] = le
		if le.Kind == EvRestored {
			c.installs++
		}
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
	sub, err := replica.Of(n).Subscribe(replica.EventFilter{All: true}, 1<<16)
	if err != nil {
		c.s.t.Fatalf("subscribe to %s: %v", nodeID, err)
	}
	w := &watcher{sub: sub, stop: make(chan struct{}), detach: c.lease.Attach(n, nodeID)}
	c.mu.Lock()
	c.subs[n] = w
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		numberEvents(sub.C, sub.Resync, w.stop, func(e fsm.Event, seq int) { c.record(nodeID, logEvent(e, seq), now()) },
			func() { c.resynced(nodeID, n) })
		sub.Close()
	}()
}

// numberEvents hands every event received on events to record with its
// position within its entry (0 for the first event of an index), until stop
// is closed; it then drains what is queued and returns.
//
// A Resync (a snapshot restore; or dropped events, which cannot happen with
// the collector's buffer and would show up as disagreements) leaves the
// numbering alone. Positions follow from the indexes: the events queued
// before the restore keep theirs, and every event after it has a higher
// index than any before it (fsm.Restore refuses an older snapshot). The
// signal and the events travel on different channels, so a receiver can see
// the Resync while events applied before the restore are still queued:
// resetting the count there made the rest of an entry's events shift by
// one position (chaos disk seed 48 of the long run: "replicas disagree on
// the event at index 410", the final digests all equal).
//
// onResync, if set, is called for every Resync received.
func numberEvents(events <-chan fsm.Event, resync <-chan struct{}, stop <-chan struct{}, record func(e fsm.Event, seq int), onResync func()) {
	var index uint64
	seq := 0
	handle := func(e fsm.Event) {
		if e.Index == index {
			seq++
		} else {
			index, seq = e.Index, 0
		}
		record(e, seq)
	}
	for {
		select {
		case e := <-events:
			handle(e)
		case <-resync:
			if onResync != nil {
				onResync()
			}
		case <-stop:
			for {
				select {
				case e := <-events:
					handle(e)
				default:
					return
				}
			}
		}
	}
}

// resynced records a Resync of node n's subscription: its applied index
// and whether it leads, read now (History.Resyncs) — at the index whose
// state replaced the old one, or an entry or a few above it.
func (c *collector) resynced(nodeID string, n *node.Node) {
	r := Resync{Node: nodeID, At: now(), Index: replica.Of(n).AppliedIndex(), Leading: n.IsLeader()}
	c.mu.Lock()
	c.resyncs = append(c.resyncs, r)
	if r.Leading {
		c.installs++
	}
	c.mu.Unlock()
}

// installCount is how many installs of restores the collector has seen
// signs of (an install may show both ways: only an increase means
// anything).
func (c *collector) installCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.installs
}

// stopped ends the observation of a node that was shut down (after it
// delivered what it had applied).
func (c *collector) stopped(n *node.Node) {
	c.mu.Lock()
	w := c.subs[n]
	delete(c.subs, n)
	c.mu.Unlock()
	if w != nil {
		w.detach()
		close(w.stop)
	}
}

func (c *collector) stopAll() {
	c.mu.Lock()
	subs := c.subs
	c.subs = map[*node.Node]*watcher{}
	c.mu.Unlock()
	for _, w := range subs {
		w.detach()
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

// resyncList returns the Resyncs received so far, each marked when its
// replica applied a restored event at that instant (the node resyncs its
// subscriptions on one: the event and the signal come together).
func (c *collector) resyncList() []Resync {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]Resync(nil), c.resyncs...)
	for i, r := range out {
		for _, at := range c.restoredAt[r.Node] {
			out[i].RestoredEvent = out[i].RestoredEvent || abs64(at-r.At) <= int64(time.Millisecond)
		}
	}
	return out
}

func (c *collector) problems() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

// ---- sampling: digests and configurations during the run ----

// samplePeriod is how often (fake time) the sampler reads every replica.
const samplePeriod = 50 * time.Millisecond

// sampler records every running replica's digest (at its applied index)
// and its Raft configuration whenever it changed, for the whole run.
type sampler struct {
	s        *sim
	stopc    chan struct{}
	done     chan struct{}
	lastConf map[string]string // node → serversKey of its last sample
	led      map[LeaderSample]bool
}

func newSampler(s *sim) *sampler {
	return &sampler{s: s, stopc: make(chan struct{}), done: make(chan struct{}), lastConf: map[string]string{}, led: map[LeaderSample]bool{}}
}

func (p *sampler) start() {
	go func() {
		defer close(p.done)
		t := time.NewTicker(samplePeriod)
		defer t.Stop()
		for {
			p.sampleAll()
			select {
			case <-t.C:
			case <-p.stopc:
				p.sampleAll()
				return
			}
		}
	}()
}

func (p *sampler) stop() {
	close(p.stopc)
	<-p.done
}

func (p *sampler) sampleAll() {
	for i := range p.s.nodes {
		if n := p.s.nodes[i].Load(); n != nil {
			p.sample(n)
		}
	}
}

func (p *sampler) sample(n *node.Node) {
	at := now()
	idx, d := replica.ServerOf(n).Digest()
	st := n.Status()
	// Leading in a term: the leader state read between two equal term
	// reads (Status reads the state before the term).
	leading := n.IsLeader() && n.Status().Term == st.Term
	servers := statusServers(st)
	key := serversKey(servers)
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h.AddSamples([]DigestSample{{Node: n.ID(), Index: idx, Hash: fmt.Sprintf("%x", d[:8]), At: at, Source: "live"}})
	if leading {
		k := LeaderSample{Node: n.ID(), Term: st.Term}
		if !p.led[k] {
			p.led[k] = true
			k.At = at
			s.h.Leaders = append(s.h.Leaders, k)
		}
	}
	if len(servers) > 0 && p.lastConf[n.ID()] != key {
		p.lastConf[n.ID()] = key
		s.h.Configs = append(s.h.Configs, ConfigSample{Node: n.ID(), At: at, Source: "live", ClusterID: clusterIDOf(st), Servers: servers, Leader: st.State == "leader"})
	}
}

// clusterIDOf is the cluster identity a node reports ("" before it belongs
// to a cluster).
func clusterIDOf(st node.Status) string { return st.ClusterID }

func statusServers(st node.Status) []ConfigServer {
	out := make([]ConfigServer, 0, len(st.Servers))
	for _, sv := range st.Servers {
		out = append(out, ConfigServer{ID: sv.ID, Addr: sv.Addr, Voter: sv.Role == node.RoleVoter})
	}
	slices.SortFunc(out, func(a, b ConfigServer) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// readDisk reads a stopped node's data dir into the history: its
// configurations, its entries and the digests of its log replayed up to
// commit (the node's commit index when it stopped: nothing beyond is known
// committed).
func (s *sim) readDisk(i int, commit uint64) {
	dir := s.c.DataDir(i)
	if dir == "" {
		return
	}
	at := now()
	rl, err := ReadReplicaLog(s.c.ID(i), dir)
	if err != nil {
		s.note("read %s's data dir: %v", s.c.ID(i), err)
		return
	}
	ds, derr := rl.DigestSamples(commit, at)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h.Configs = append(s.h.Configs, rl.Configurations(at)...)
	s.h.AddEntries(rl.EntrySamples(at))
	if derr == nil && commit > 0 {
		s.h.AddSamples(ds)
	}
}
