package gossip

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// memberlist calls the delegates below with its own lock held: they only
// touch m.mu and never call memberlist.

// NodeMeta implements memberlist.Delegate.
func (m *Layer) NodeMeta(limit int) []byte {
	m.mu.Lock()
	b, err := json.Marshal(m.meta)
	m.mu.Unlock()
	if err != nil || len(b) > limit {
		return nil // checked at start; cannot happen
	}
	return b
}

// NotifyMsg implements memberlist.Delegate: a leader's refusal notice
// (Notify); anything else, or a notice with unknown fields, is ignored.
func (m *Layer) NotifyMsg(b []byte) {
	if len(b) < 2 || b[0] != userMsgRefusal || len(b) > maxUserMsg {
		return
	}
	var r Refusal
	d := json.NewDecoder(bytes.NewReader(b[1:]))
	d.DisallowUnknownFields()
	if d.Decode(&r) != nil || r.Reason == "" {
		return
	}
	m.h.Refused(r.Reason, r.Detail, r.By)
}

// GetBroadcasts implements memberlist.Delegate (no user broadcasts).
func (m *Layer) GetBroadcasts(int, int) [][]byte { return nil }

// LocalState implements memberlist.Delegate (no user state).
func (m *Layer) LocalState(bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate (no user state).
func (m *Layer) MergeRemoteState([]byte, bool) {}

// NotifyAlive implements memberlist.AliveDelegate: members with bad or
// incompatible metadata, or of another cluster, are refused (memberlist
// then ignores them, so two clusters whose gossip meets stay apart).
func (m *Layer) NotifyAlive(peer *memberlist.Node) error {
	md, reason, err := decodeMeta(peer.Name, peer.Meta, m.cfg.Wire)
	if err == nil {
		err = m.foreign(md)
		reason = "cluster_id"
	}
	if err != nil {
		m.conflict(reason, peer.Name+"@"+peer.Address(), "refused gossip member", "member", peer.Name, "gossip_addr", peer.Address(), "err", err)
		m.h.Refused(reason, err.Error(), peer.Name+"@"+peer.Address())
		return err
	}
	return nil
}

// NotifyConflict implements memberlist.ConflictDelegate: two live nodes
// claim one name (id). memberlist keeps the one it knew first.
func (m *Layer) NotifyConflict(existing, other *memberlist.Node) {
	if existing.Name != m.cfg.ID {
		m.conflict("duplicate_id", existing.Name+"@"+other.Address(), "refused gossip member: its id is in use by another member",
			"member", other.Name, "gossip_addr", other.Address(), "in_use_by", existing.Address())
		return
	}
	if !m.h.HasRaftState() {
		m.mu.Lock()
		if m.fatal == nil {
			m.fatal = fmt.Errorf("%w: member %q at %s already uses this node's id", ErrDuplicateID, other.Name, other.Address())
		}
		m.mu.Unlock()
		m.wake()
	}
	m.conflict("duplicate_id", other.Name+"@"+other.Address(), "another node claims this node's id", "member", other.Name, "its_gossip_addr", other.Address(), "our_gossip_addr", existing.Address())
}

// NotifyJoin implements memberlist.EventDelegate.
func (m *Layer) NotifyJoin(node *memberlist.Node) { m.observe(node, Alive) }

// NotifyUpdate implements memberlist.EventDelegate.
func (m *Layer) NotifyUpdate(node *memberlist.Node) { m.observe(node, Alive) }

// NotifyLeave implements memberlist.EventDelegate: the member failed, or
// left if it had announced that it was leaving.
func (m *Layer) NotifyLeave(node *memberlist.Node) { m.observe(node, Dead) }

func (m *Layer) observe(node *memberlist.Node, state State) {
	md, _, err := decodeMeta(node.Name, node.Meta, m.cfg.Wire)
	if err == nil && m.foreign(md) != nil {
		m.mu.Lock()
		delete(m.members, node.Name)
		m.mu.Unlock()
		return
	}
	now := time.Now()
	m.mu.Lock()
	mi := m.members[node.Name]
	if mi == nil {
		if err != nil || state != Alive {
			m.mu.Unlock()
			return
		}
		mi = &memberInfo{}
		m.members[node.Name] = mi
	}
	if err == nil {
		mi.meta = md
	}
	mi.gossip = node.Address()
	if mi.meta.Leaving {
		state = Left // announced: it leaves as soon as it is removed
	}
	if mi.state != state || mi.since.IsZero() {
		mi.state, mi.since = state, now
	}
	if state == Alive {
		mi.heard = now
	}
	m.mu.Unlock()
	if state == Alive && err == nil && node.Name != m.cfg.ID {
		m.known.seen(node.Name, node.Address())
	}
	m.wake()
	m.h.Changed()
}

// AckPayload implements memberlist.PingDelegate.
func (m *Layer) AckPayload() []byte { return nil }

// NotifyPingComplete implements memberlist.PingDelegate: a direct probe was
// answered.
func (m *Layer) NotifyPingComplete(other *memberlist.Node, _ time.Duration, _ []byte) {
	m.mu.Lock()
	if mi := m.members[other.Name]; mi != nil && mi.state == Alive {
		mi.heard = time.Now()
	}
	m.mu.Unlock()
}

// memberlistLog turns memberlist's "[LEVEL] memberlist: text" lines into
// records of the node's logger: errors become warnings, warnings info, the
// rest debug.
type memberlistLog struct{ l *slog.Logger }

func (w memberlistLog) Write(p []byte) (int, error) {
	s := strings.TrimSpace(string(p))
	level := slog.LevelDebug
	for prefix, lv := range map[string]slog.Level{"[ERR]": slog.LevelWarn, "[ERROR]": slog.LevelWarn, "[WARN]": slog.LevelInfo, "[INFO]": slog.LevelDebug, "[DEBUG]": slog.LevelDebug} {
		if strings.HasPrefix(s, prefix) {
			level, s = lv, strings.TrimSpace(s[len(prefix):])
			break
		}
	}
	s = strings.TrimPrefix(s, "memberlist: ")
	w.l.Log(context.Background(), level, s)
	return len(p), nil
}
