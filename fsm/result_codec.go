package fsm

import (
	"encoding/binary"
)

// MaxReasonLen bounds Result.Reason on the wire.
const MaxReasonLen = 1024

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
	dst = appendString(dst, truncate(r.Holder.Description, MaxDescriptionLen))
	dst = binary.AppendVarint(dst, r.DelayUntil)
	dst = binary.AppendUvarint(dst, uint64(max(r.Count, 0)))
	dst = appendString(dst, truncate(r.Reason, MaxReasonLen))
	if r.Status == StatusQuota {
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
	d := decoder{b: b}
	var r Result
	r.Status = Status(d.byte())
	r.Session = d.session()
	r.Token = Token(d.uvarint())
	r.Position = d.int()
	r.Holder.Session = d.session()
	r.Holder.Owner = d.owner()
	r.Holder.Token = Token(d.uvarint())
	r.Holder.AcquiredAt = d.varint()
	r.Holder.AcquiredIdx = d.uvarint()
	r.Holder.Description = d.string(MaxDescriptionLen)
	r.DelayUntil = d.varint()
	r.Count = d.int()
	r.Reason = d.string(MaxReasonLen)
	if d.err == nil && (r.Status < StatusOK || r.Status > maxStatus) {
		d.fail("unknown status %d", r.Status)
	}
	if r.Status == StatusQuota {
		if r.Quota = Quota(d.byte()); d.err == nil && (r.Quota < 1 || r.Quota > maxQuotaKind) {
			d.fail("unknown quota %d", r.Quota)
		}
	}
	if d.err != nil {
		return Result{}, b, d.err
	}
	return r, b[d.off:], nil
}
