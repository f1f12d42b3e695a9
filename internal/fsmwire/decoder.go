package fsmwire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Decoder reads the state machine's encodings from a byte slice (all
// integers varint-encoded as in encoding/binary; string = uvarint length +
// bytes). The first error sticks, wrapping ErrInvalidEntry; later reads
// return zero values. It never panics and allocates no more than the input
// justifies.
type Decoder struct {
	B       []byte
	Off     int
	Err     error
	Version byte // entry version, for command bodies
}

// Fail records a malformed-input error (the first one sticks).
func (d *Decoder) Fail(format string, args ...any) {
	if d.Err == nil {
		d.Err = fmt.Errorf("%w: "+format+" at byte %d", append([]any{ErrInvalidEntry}, append(args, d.Off)...)...)
	}
}

// Unsupported fails with an error that halts the state machine (it also
// wraps ErrUnsupportedVersion).
func (d *Decoder) Unsupported(format string, args ...any) {
	if d.Err == nil {
		d.Err = fmt.Errorf("%w: %w: "+format+" at byte %d", append([]any{ErrInvalidEntry, ErrUnsupportedVersion}, append(args, d.Off)...)...)
	}
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if d.Err != nil {
		return 0
	}
	if d.Off >= len(d.B) {
		d.Fail("truncated")
		return 0
	}
	v := d.B[d.Off]
	d.Off++
	return v
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B[d.Off:])
	if n <= 0 {
		d.Fail("bad uvarint")
		return 0
	}
	d.Off += n
	return v
}

// Varint reads a signed varint.
func (d *Decoder) Varint() int64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Varint(d.B[d.Off:])
	if n <= 0 {
		d.Fail("bad varint")
		return 0
	}
	d.Off += n
	return v
}

// Count reads a uvarint element count, bounded by max and by the bytes left
// (each element takes at least minSize bytes), so that garbage cannot make
// the decoder allocate more than the input justifies.
func (d *Decoder) Count(max, minSize int) int {
	v := d.Uvarint()
	if d.Err != nil {
		return 0
	}
	if v > uint64(max) || v > uint64((len(d.B)-d.Off)/minSize) {
		d.Fail("count %d out of range", v)
		return 0
	}
	return int(v)
}

// String reads a string of at most max bytes.
func (d *Decoder) String(max int) string {
	n := d.Uvarint()
	if d.Err != nil {
		return ""
	}
	if n > uint64(max) || n > uint64(len(d.B)-d.Off) {
		d.Fail("string of %d bytes out of range", n)
		return ""
	}
	s := string(d.B[d.Off : d.Off+int(n)])
	d.Off += int(n)
	return s
}

// Bytes reads a uvarint length and that many bytes (a copy), at most max.
func (d *Decoder) Bytes(max int) []byte {
	n := d.Uvarint()
	if d.Err != nil {
		return nil
	}
	if n > uint64(max) || n > uint64(len(d.B)-d.Off) {
		d.Fail("%d bytes out of range", n)
		return nil
	}
	b := make([]byte, n)
	copy(b, d.B[d.Off:])
	d.Off += int(n)
	return b
}

// ID reads 16 raw bytes (an owner id, a restore id).
func (d *Decoder) ID() (o [16]byte) {
	if d.Err != nil {
		return o
	}
	if len(d.B)-d.Off < len(o) {
		d.Fail("truncated owner id")
		return o
	}
	copy(o[:], d.B[d.Off:])
	d.Off += len(o)
	return o
}

// Session reads a session id (at most MaxInt64).
func (d *Decoder) Session() uint64 {
	v := d.Uvarint()
	if v > math.MaxInt64 {
		d.Fail("session id out of range")
	}
	return v
}

// Int reads a non-negative integer of at most MaxInt32.
func (d *Decoder) Int() int {
	v := d.Uvarint()
	if v > math.MaxInt32 {
		d.Fail("integer %d out of range", v)
		return 0
	}
	return int(v)
}

// End reports the decoder's error, or an error if bytes are left over.
func (d *Decoder) End() error {
	if d.Err == nil && d.Off != len(d.B) {
		d.Fail("%d trailing bytes", len(d.B)-d.Off)
	}
	return d.Err
}

// AppendString appends s as a uvarint length and its bytes.
func AppendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// AppendRequest appends a request number and its acknowledgement.
func AppendRequest(dst []byte, seq, ackBelow uint64) []byte {
	dst = binary.AppendUvarint(dst, seq)
	return binary.AppendUvarint(dst, ackBelow)
}
