// Package grantwire encodes the hand-off grants a leader announces to the
// other replicas before they apply them (node's grant notices): lists of
// fsm.Event of kind EventGranted, in the byte primitives of fsmwire.
package grantwire

import (
	"encoding/binary"
	"fmt"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Encoding of a list of grants (hand-off grants that a leader announces to
// the other replicas before they apply them; see node's announcer):
//
//	n uvarint, 0..MaxGrants
//	n × (index uvarint, at varint, session uvarint, lock string,
//	     owner [16]byte, token uvarint)
//
// string = uvarint length + bytes, as in entries.

// AppendGrants appends the encoding of grants (EventGranted events; only
// the fields above are kept) to dst. At most MaxGrants are encoded.
func AppendGrants(dst []byte, grants []fsm.Event) []byte {
	grants = grants[:min(len(grants), fsmwire.MaxGrants)]
	dst = binary.AppendUvarint(dst, uint64(len(grants)))
	for _, g := range grants {
		dst = binary.AppendUvarint(dst, g.Index)
		dst = binary.AppendVarint(dst, g.At)
		dst = binary.AppendUvarint(dst, uint64(g.Session))
		dst = fsmwire.AppendString(dst, g.Lock)
		dst = append(dst, g.Owner[:]...)
		dst = binary.AppendUvarint(dst, uint64(g.Token))
	}
	return dst
}

// DecodeGrants decodes a list encoded by AppendGrants, the whole of b, as
// EventGranted events with FromQueue set. Malformed input, or an
// implausible grant (zero index, session, owner or token, an invalid lock
// name), returns an error wrapping ErrInvalidEntry.
func DecodeGrants(b []byte) ([]fsm.Event, error) {
	d := fsmwire.Decoder{B: b}
	n := d.Count(fsmwire.MaxGrants, 19)
	grants := make([]fsm.Event, 0, n)
	for i := 0; i < n && d.Err == nil; i++ {
		g := fsm.Event{Kind: fsmwire.EventGranted, FromQueue: true, Index: d.Uvarint(), At: d.Varint(), Session: lockinfo.SessionID(d.Session()),
			Lock: d.String(fsmwire.MaxLockNameLen), Owner: lockinfo.OwnerID(d.ID()), Token: d.Uvarint()}
		if d.Err != nil {
			break
		}
		if g.Index == 0 || g.Session == 0 || g.Owner.IsZero() || g.Token == 0 || fsmwire.ValidateLockName(g.Lock) != nil {
			return nil, fmt.Errorf("%w: implausible grant %d", fsmwire.ErrInvalidEntry, i)
		}
		grants = append(grants, g)
	}
	if err := d.End(); err != nil {
		return nil, err
	}
	return grants, nil
}
