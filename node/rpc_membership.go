package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/raftlock/raftlock/internal/gossip"
)

// Membership messages between replicas (formation, joins, refusal notices)
// travel as one kind of forwarding request:
//
//	request: v, kindMembership, op byte, JSON body
//	reply:   v, kindMembership, JSON body
//
// JSON because these messages are rare and small, and read by people when
// something goes wrong; bodies are bounded (maxMembershipMsg) and decoded
// strictly (unknown fields refused). An op this node does not know gets an
// error reply (the transport carries it to the caller).
const kindMembership byte = 32

// Membership ops.
const (
	opPrepare byte = 1 // formation phase 1 (formationMsg → formationReply)
	opAccept  byte = 2 // formation phase 2
	opDecided byte = 3 // formation: the chosen value, to its founders
	opJoin    byte = 4 // a node asks the leader to add it (joinMsg → joinReply)
	opRefused byte = 5 // the leader tells a node why it was refused (gossip.Refusal → {})
	opStatus  byte = 6 // the leader's probe ({} → statusReply)
	opLeave   byte = 7 // a node asks the leader to remove it for good (leaveMsg → joinReply)
)

// maxMembershipMsg bounds a membership message body.
const maxMembershipMsg = 64 << 10

var errMembershipMsg = errors.New("node: malformed membership message")

func encodeMembership(op byte, body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return append([]byte{wireVersion, kindMembership, op}, b...), nil
}

// decodeJSON decodes a bounded body strictly into v.
func decodeJSON(b []byte, v any) error {
	if len(b) > maxMembershipMsg {
		return fmt.Errorf("%w: body of %d bytes", errMembershipMsg, len(b))
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", errMembershipMsg, err)
	}
	if d.More() {
		return fmt.Errorf("%w: trailing data", errMembershipMsg)
	}
	return nil
}

// handleMembership serves a membership request (req starts after the kind
// byte).
func (n *Node) handleMembership(ctx context.Context, req []byte) ([]byte, error) {
	if len(req) < 1 {
		return nil, fmt.Errorf("%w: no op", errMembershipMsg)
	}
	if !n.started.Load() {
		return nil, fmt.Errorf("node: starting")
	}
	op, body := req[0], req[1:]
	var reply any
	switch op {
	case opPrepare, opAccept, opDecided:
		var m formationMsg
		if err := decodeJSON(body, &m); err != nil {
			return nil, err
		}
		if n.formation == nil {
			id := n.ident()
			reply = formationReply{From: formationSelf(n), HasState: n.hasRaftState(), ClusterID: id.ClusterID, Refused: "this node does not found a cluster"}
			break
		}
		r, err := n.formation.handle(op, m)
		if err != nil {
			return nil, err
		}
		reply = r
	case opStatus:
		var m statusMsg
		if err := decodeJSON(body, &m); err != nil {
			return nil, err
		}
		reply = n.statusReply(m)
	case opLeave:
		var m leaveMsg
		if err := decodeJSON(body, &m); err != nil {
			return nil, err
		}
		reply = n.handleLeave(ctx, m)
	case opJoin:
		var m joinMsg
		if err := decodeJSON(body, &m); err != nil {
			return nil, err
		}
		reply = n.handleJoin(m)
	case opRefused:
		var m gossip.Refusal
		if err := decodeJSON(body, &m); err != nil {
			return nil, err
		}
		n.refusals.add(m.Reason, m.Detail, m.By)
		reply = struct{}{}
	default:
		return nil, fmt.Errorf("%w: unknown op %d", errMembershipMsg, op)
	}
	b, err := json.Marshal(reply)
	if err != nil {
		return nil, err
	}
	return append([]byte{wireVersion, kindMembership}, b...), nil
}

// callMembership sends a membership request to addr and decodes the reply.
func (n *Node) callMembership(ctx context.Context, addr string, op byte, body, reply any) error {
	req, err := encodeMembership(op, body)
	if err != nil {
		return err
	}
	b, err := n.trans.Call(ctx, addr, req)
	if err != nil {
		return err
	}
	if len(b) < 2 || b[0] != wireVersion || b[1] != kindMembership {
		return fmt.Errorf("%w: bad reply header", errMembershipMsg)
	}
	return decodeJSON(b[2:], reply)
}
