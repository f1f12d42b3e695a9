package admin

import (
	"context"
	_ "embed"
	"net/http"
	"sync"
	"time"

	"github.com/raftlock/raftlock/node"
)

// StatusJSON is the answer of GET /v1/status: the node's Status, its
// health (Health: readiness with reasons, warnings, fault tolerance), and
// the state of this process's shared HTTP session. It is 503 (with the
// same body) while the node is not ready.
type StatusJSON struct {
	ID                string        `json:"id"`
	RaftID            string        `json:"raft_id"`
	ClusterID         string        `json:"cluster_id"`
	Addr              string        `json:"addr"`
	State             string        `json:"state"` // leader, follower, candidate, shutdown
	LeaderID          string        `json:"leader_id"`
	LeaderAddr        string        `json:"leader_addr"`
	Term              uint64        `json:"term"`
	LastIndex         uint64        `json:"last_index"`
	CommitIndex       uint64        `json:"commit_index"`
	AppliedIndex      uint64        `json:"applied_index"`
	LastContactMS     int64         `json:"last_contact_ms"`
	Ready             bool          `json:"ready"`
	Health            HealthJSON    `json:"health"`
	ClusterVersion    uint64        `json:"cluster_version"`
	MaxClusterVersion uint64        `json:"max_cluster_version"`
	Halted            string        `json:"halted,omitempty"`
	Formation         string        `json:"formation,omitempty"`
	Refusals          []RefusalJSON `json:"refusals"`
	Servers           []ServerJSON  `json:"servers"`
	GossipAddr        string        `json:"gossip_addr,omitempty"`
	GossipError       string        `json:"gossip_error,omitempty"`
	JoinError         string        `json:"join_error,omitempty"`
	Members           []MemberJSON  `json:"members"`
	FSM               FSMJSON       `json:"fsm"`
	Session           SessionInfo   `json:"session"`
	Leases            int           `json:"leases"` // handles held by HTTP clients
	TimeUnixMS        int64         `json:"time_unix_ms"`
}

// RefusalJSON is one refusal the node took part in (node.Refusal).
type RefusalJSON struct {
	Reason     string `json:"reason"`
	Detail     string `json:"detail"`
	Peer       string `json:"peer,omitempty"`
	LastUnixMS int64  `json:"last_unix_ms"`
	Count      int    `json:"count"`
}

// ServerJSON is one server of the Raft configuration.
type ServerJSON struct {
	ID     string `json:"id"`
	RaftID string `json:"raft_id"` // the node id and its incarnation: a node that lost its data dir comes back as another
	Addr   string `json:"addr"`
	Role   string `json:"role"`
	Leader bool   `json:"leader"`
}

// MemberJSON is one member as gossip (and the Raft configuration) sees it,
// with what the member says of itself when it answered (GET /v1/members
// and the status page ask every server; /v1/status does not).
type MemberJSON struct {
	ID          string `json:"id"`
	Addr        string `json:"addr"`
	GossipAddr  string `json:"gossip_addr,omitempty"`
	State       string `json:"state"`
	SinceUnixMS int64  `json:"since_unix_ms,omitempty"`
	Role        string `json:"role,omitempty"`
	Leader      bool   `json:"leader"`
	// From its answer to the peer-info RPC (with ?probe=1):
	Probed        bool   `json:"probed,omitempty"`
	Reachable     bool   `json:"reachable,omitempty"`
	ProbeError    string `json:"probe_error,omitempty"`
	RaftState     string `json:"raft_state,omitempty"`
	AppliedIndex  uint64 `json:"applied_index,omitempty"`
	Lag           uint64 `json:"lag"` // entries behind the highest commit index reported
	LastContactMS int64  `json:"last_contact_ms,omitempty"`
	Halted        string `json:"halted,omitempty"`
}

// FSMJSON are the local state machine's counters.
type FSMJSON struct {
	Index       uint64 `json:"index"`
	ClockUnixMS int64  `json:"clock_unix_ms"`
	Sessions    int    `json:"sessions"`
	Locks       int    `json:"locks"`
	Held        int    `json:"held"`
	Waiters     int    `json:"waiters"`
	Delayed     int    `json:"delayed"`
	LastToken   uint64 `json:"last_token"`

	// Cluster version 3: read grants, semaphores in use, permits held.
	Readers     int `json:"readers"`
	Semaphores  int `json:"semaphores"`
	PermitsHeld int `json:"permits_held"`
}

// Status returns what GET /v1/status answers (peers: as last probed, if
// recently; nil: not probed).
func (s *Server) Status(peers []node.PeerStatus) StatusJSON {
	st := s.n.Status()
	out := StatusJSON{
		ID: st.ID, RaftID: st.RaftID, ClusterID: st.ClusterID, Addr: st.Addr, State: st.State, LeaderID: st.LeaderID, LeaderAddr: st.LeaderAddr,
		Term: st.Term, LastIndex: st.LastIndex, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
		LastContactMS: st.LastContact.Milliseconds(), Health: assess(st, peers, s.n.Timing(), time.Now()),
		ClusterVersion: st.ClusterVersion, MaxClusterVersion: st.MaxClusterVersion, Halted: st.Halted, Formation: st.Formation,
		Refusals: []RefusalJSON{}, Servers: []ServerJSON{}, Members: s.memberList(st, peers),
		GossipAddr: st.GossipAddr, GossipError: st.GossipErr, JoinError: st.JoinErr,
		FSM: FSMJSON{
			Index: st.FSM.Index, ClockUnixMS: nsToMS(st.FSM.Clock), Sessions: st.FSM.Sessions, Locks: st.FSM.Locks,
			Held: st.FSM.Held, Waiters: st.FSM.Waiters, Delayed: st.FSM.Delayed, LastToken: st.FSM.LastToken,
			Readers: st.FSM.Readers, Semaphores: st.FSM.Semaphores, PermitsHeld: st.FSM.PermitsHeld,
		},
		Session:    s.sess.Info(),
		Leases:     s.handles.count(),
		TimeUnixMS: time.Now().UnixMilli(),
	}
	out.Ready = out.Health.Ready
	for _, sv := range st.Servers {
		out.Servers = append(out.Servers, ServerJSON{ID: sv.ID, RaftID: sv.RaftID, Addr: sv.Addr, Role: string(sv.Role), Leader: sv.Leader})
	}
	for _, r := range st.Refusals {
		out.Refusals = append(out.Refusals, RefusalJSON{Reason: r.Reason, Detail: public(r.Detail), Peer: r.Peer, LastUnixMS: r.Last.UnixMilli(), Count: r.Count})
	}
	return out
}

// memberList joins gossip members (or, without gossip, the servers) with
// the peers' own answers.
func (s *Server) memberList(st node.Status, peers []node.PeerStatus) []MemberJSON {
	byID := map[string]node.PeerStatus{}
	for _, p := range peers {
		byID[p.ID] = p
	}
	out := []MemberJSON{}
	add := func(mj MemberJSON) {
		if p, ok := byID[mj.ID]; ok {
			mj.Probed, mj.Reachable, mj.ProbeError = true, p.Reachable, public(p.Err)
			mj.RaftState, mj.AppliedIndex, mj.Lag, mj.Halted = p.State, p.AppliedIndex, p.Lag, p.Halted
			mj.LastContactMS = p.LastContact.Milliseconds()
		}
		out = append(out, mj)
	}
	for _, m := range st.Members {
		mj := MemberJSON{ID: m.ID, Addr: m.Addr, GossipAddr: m.GossipAddr, State: string(m.State), Role: string(m.Role), Leader: m.Leader}
		if !m.Since.IsZero() {
			mj.SinceUnixMS = m.Since.UnixMilli()
		}
		add(mj)
	}
	if len(st.Members) == 0 { // without gossip: the Raft configuration
		for _, sv := range st.Servers {
			add(MemberJSON{ID: sv.ID, Addr: sv.Addr, State: string(node.MemberUnknown), Role: string(sv.Role), Leader: sv.Leader})
		}
	}
	return out
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	var peers []node.PeerStatus
	if probeParam(r) {
		peers = s.peers.get(r.Context(), s.n)
	}
	st := s.Status(peers)
	code := http.StatusOK
	if !st.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, st)
}

// members answers GET /v1/members: every member, probed (unless
// ?probe=0).
func (s *Server) members(w http.ResponseWriter, r *http.Request) {
	var peers []node.PeerStatus
	if v := r.URL.Query().Get("probe"); v != "0" && v != "false" {
		peers = s.peers.get(r.Context(), s.n)
	}
	writeJSON(w, http.StatusOK, struct {
		Members []MemberJSON `json:"members"`
	}{s.memberList(s.n.Status(), peers)})
}

func probeParam(r *http.Request) bool {
	v := r.URL.Query().Get("probe")
	return v == "1" || v == "true"
}

// peerCache keeps the last probe of the servers for a second: the status
// page asks every second, and each probe is one RPC per server.
type peerCache struct {
	mu    sync.Mutex
	at    time.Time
	peers []node.PeerStatus
}

const peerCacheFor = time.Second

func (c *peerCache) get(ctx context.Context, n *node.Node) []node.PeerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < peerCacheFor {
		return c.peers
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c.peers, c.at = n.Peers(ctx), time.Now()
	return c.peers
}

// healthz: the process is up (and serving HTTP).
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "id": s.n.ID()})
}

// ReadyJSON is the answer of GET /readyz.
type ReadyJSON struct {
	Ready   bool     `json:"ready"`
	Reasons []string `json:"reasons"` // why not
}

// readyz: 200 when a leader is known and this node has caught up, 503
// (with the reasons) otherwise.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	h := assess(s.n.Status(), nil, s.n.Timing(), time.Now())
	code := http.StatusOK
	if !h.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, ReadyJSON{Ready: h.Ready, Reasons: h.Reasons})
}

// whoami answers who the caller is (the status page shows it).
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	p := PrincipalOf(r)
	writeJSON(w, http.StatusOK, map[string]string{"name": p.Name, "role": string(p.Role)})
}

//go:embed status.html
var statusPage []byte

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	w.Write(statusPage)
}
