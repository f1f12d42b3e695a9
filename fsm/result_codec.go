package fsm

import (
	"encoding/binary"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// AppendResult appends a compact encoding of r to dst, so that results can be
// carried between replicas (a follower forwards commands to the leader and
// gets their results back). Reason is truncated to MaxReasonLen bytes.
//
//	status byte, session, token, position, holder (session, owner [16],
//	token, acquiredAt, acquiredIdx, description), delayUntil, count, reason
//	[quota byte]   only with StatusQuota
//
// The quota byte exists only for StatusQuota, a status a state machine of
// cluster version 1 never produces, so replicas of the previous release
// read every result they can be sent.
func AppendResult(dst []byte, r Result) []byte {
	dst = append(dst, byte(r.Status))
	dst = binary.AppendUvarint(dst, uint64(r.Session))
	dst = binary.AppendUvarint(dst, uint64(r.Token))
	dst = binary.AppendUvarint(dst, uint64(max(r.Position, 0)))
	dst = binary.AppendUvarint(dst, uint64(r.Holder.Session))
	dst = append(dst, r.Holder.Owner[:]...)
	dst = binary.AppendUvarint(dst, uint64(r.Holder.Token))
	dst = binary.AppendVarint(dst, r.Holder.AcquiredAt)
	dst = binary.AppendUvarint(dst, r.Holder.AcquiredIdx)
	dst = fsmwire.AppendString(dst, truncate(r.Holder.Description, fsmwire.MaxDescriptionLen))
	dst = binary.AppendVarint(dst, r.DelayUntil)
	dst = binary.AppendUvarint(dst, uint64(max(r.Count, 0)))
	dst = fsmwire.AppendString(dst, truncate(r.Reason, fsmwire.MaxReasonLen))
	if r.Status == fsmwire.StatusQuota {
		dst = append(dst, byte(r.Quota))
	}
	return dst
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// DecodeResult decodes one result from the front of b and returns the rest.
// Malformed input returns an error wrapping ErrInvalidEntry.
func DecodeResult(b []byte) (Result, []byte, error) {
	d := newDecoder(b)
	var r Result
	r.Status = fsmwire.Status(d.Byte())
	r.Session = d.session()
	r.Token = lockinfo.Token(d.Uvarint())
	r.Position = d.Int()
	r.Holder.Session = d.session()
	r.Holder.Owner = d.owner()
	r.Holder.Token = lockinfo.Token(d.Uvarint())
	r.Holder.AcquiredAt = d.Varint()
	r.Holder.AcquiredIdx = d.Uvarint()
	r.Holder.Description = d.String(fsmwire.MaxDescriptionLen)
	r.DelayUntil = d.Varint()
	r.Count = d.Int()
	r.Reason = d.String(fsmwire.MaxReasonLen)
	if d.Err == nil && (r.Status < fsmwire.StatusOK || r.Status > fsmwire.MaxStatus) {
		d.Fail("unknown status %d", r.Status)
	}
	if r.Status == fsmwire.StatusQuota {
		if r.Quota = fsmwire.Quota(d.Byte()); d.Err == nil && (r.Quota < 1 || r.Quota > fsmwire.MaxQuota) {
			d.Fail("unknown quota %d", r.Quota)
		}
	}
	if d.Err != nil {
		return Result{}, b, d.Err
	}
	return r, b[d.Off:], nil
}
