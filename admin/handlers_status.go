package lockhttp

import (
	_ "embed"
	"net/http"
	"time"

	"github.com/raftlock/raftlock/node"
)

// StatusJSON is the answer of GET /v1/status: the node's Status, and the
// state of this process's HTTP session.
type StatusJSON struct {
	ID            string       `json:"id"`
	Addr          string       `json:"addr"`
	State         string       `json:"state"` // leader, follower, candidate, shutdown
	LeaderID      string       `json:"leader_id"`
	LeaderAddr    string       `json:"leader_addr"`
	Term          uint64       `json:"term"`
	LastIndex     uint64       `json:"last_index"`
	CommitIndex   uint64       `json:"commit_index"`
	AppliedIndex  uint64       `json:"applied_index"`
	LastContactMS int64        `json:"last_contact_ms"`
	Ready         bool         `json:"ready"`
	Servers       []ServerJSON `json:"servers"`
	GossipAddr    string       `json:"gossip_addr,omitempty"`
	GossipError   string       `json:"gossip_error,omitempty"`
	Members       []MemberJSON `json:"members"`
	FSM           FSMJSON      `json:"fsm"`
	Session       SessionInfo  `json:"session"`
	Leases        int          `json:"leases"` // handles held by HTTP clients
	TimeUnixMS    int64        `json:"time_unix_ms"`
}

// ServerJSON is one server of the Raft configuration.
type ServerJSON struct {
	ID     string `json:"id"`
	Addr   string `json:"addr"`
	Role   string `json:"role"`
	Leader bool   `json:"leader"`
}

// MemberJSON is one member as gossip (and the Raft configuration) sees it.
type MemberJSON struct {
	ID          string `json:"id"`
	Addr        string `json:"addr"`
	GossipAddr  string `json:"gossip_addr,omitempty"`
	State       string `json:"state"`
	SinceUnixMS int64  `json:"since_unix_ms,omitempty"`
	Role        string `json:"role,omitempty"`
	Leader      bool   `json:"leader"`
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
}

// Status returns what GET /v1/status answers.
func (s *Server) Status() StatusJSON {
	st := s.n.Status()
	out := StatusJSON{
		ID: st.ID, Addr: st.Addr, State: st.State, LeaderID: st.LeaderID, LeaderAddr: st.LeaderAddr,
		Term: st.Term, LastIndex: st.LastIndex, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
		LastContactMS: st.LastContact.Milliseconds(), Ready: st.Ready,
		Servers: []ServerJSON{}, Members: []MemberJSON{},
		GossipAddr: st.GossipAddr, GossipError: st.GossipErr,
		FSM: FSMJSON{
			Index: st.FSM.Index, ClockUnixMS: nsToMS(st.FSM.Clock), Sessions: st.FSM.Sessions, Locks: st.FSM.Locks,
			Held: st.FSM.Held, Waiters: st.FSM.Waiters, Delayed: st.FSM.Delayed, LastToken: uint64(st.FSM.LastToken),
		},
		Session:    s.sess.Info(),
		Leases:     s.handles.count(),
		TimeUnixMS: time.Now().UnixMilli(),
	}
	for _, sv := range st.Servers {
		out.Servers = append(out.Servers, ServerJSON{ID: sv.ID, Addr: sv.Addr, Role: string(sv.Role), Leader: sv.Leader})
	}
	for _, m := range st.Members {
		mj := MemberJSON{ID: m.ID, Addr: m.Addr, GossipAddr: m.GossipAddr, State: string(m.State), Role: string(m.Role), Leader: m.Leader}
		if !m.Since.IsZero() {
			mj.SinceUnixMS = m.Since.UnixMilli()
		}
		out.Members = append(out.Members, mj)
	}
	if len(st.Members) == 0 { // without gossip: the Raft configuration
		for _, sv := range st.Servers {
			out.Members = append(out.Members, MemberJSON{ID: sv.ID, Addr: sv.Addr, State: string(node.MemberUnknown), Role: string(sv.Role), Leader: sv.Leader})
		}
	}
	return out
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Status())
}

//go:embed status.html
var statusPage []byte

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(statusPage)
}
