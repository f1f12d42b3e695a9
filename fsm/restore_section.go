package fsm

import (
	"encoding/binary"
	"math"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// restoresSection carries the restores' replicated state (restores) in a
// version-4 snapshot: a replica that installs a snapshot taken while a
// backup is being staged has the bytes staged so far, and one taken after
// an install still answers a repeat of it. Records:
//
//	header: #installed, #installed × (ID [16]byte, index, Sessions, Locks,
//	        Held, Waiters, BackupLastToken, LastToken, SessionOffset,
//	        BackupIndex), staged byte (0 or 1),
//	        [ID [16]byte, total, size, last, #chunks]
//	chunk:  data bytes                     (#chunks records, in order)
//
// Left out when nothing was installed and nothing is staged.
var restoresSection = snapshotSection{
	tag:  1,
	name: "restores",
	records: func(st *state) int {
		r := &st.restores
		switch {
		case r.staging != nil:
			return 1 + len(r.staging.chunks)
		case len(r.installed) > 0:
			return 1
		}
		return 0
	},
	encode: func(st *state, i int, rec []byte) []byte {
		r := &st.restores
		if i > 0 {
			c := r.staging.chunks[i-1]
			rec = binary.AppendUvarint(rec, uint64(len(c)))
			return append(rec, c...)
		}
		rec = binary.AppendUvarint(rec, uint64(len(r.installed)))
		for _, in := range r.installed {
			rec = append(rec, in.id[:]...)
			for _, x := range in.fields() {
				rec = binary.AppendUvarint(rec, x)
			}
		}
		s := r.staging
		if s == nil {
			return append(rec, 0)
		}
		rec = append(rec, 1)
		rec = append(rec, s.id[:]...)
		for _, x := range []uint64{s.total, s.size, s.last, uint64(len(s.chunks))} {
			rec = binary.AppendUvarint(rec, x)
		}
		return rec
	},
	decode: func(st *state, i, n int, d *decoder) {
		r := &st.restores
		if i > 0 {
			s := r.staging
			c := d.Bytes(maxRestoreChunk)
			if d.Err != nil {
				return
			}
			if s == nil {
				d.Fail("restore chunk without a staging")
				return
			}
			if len(c) == 0 {
				d.Fail("empty restore chunk")
				return
			}
			s.chunks = append(s.chunks, c)
			if got := stagedSize(s.chunks); got > s.size || (i == n-1 && got != s.size) {
				d.Fail("restore chunks of %d bytes, %d staged", got, s.size)
			}
			return
		}
		installed := d.Count(restoreHistory, 16+9)
		for j := 0; j < installed && d.Err == nil; j++ {
			in := installedRestore{id: [16]byte(d.owner())}
			in.decodeFields(d)
			if in.id == [16]byte{} {
				d.Fail("installed restore without an id")
			}
			if j > 0 && in.index <= r.installed[j-1].index {
				d.Fail("installed restores out of order")
			}
			if in.index > st.index {
				d.Fail("restore installed at %d, beyond the applied index %d", in.index, st.index)
			}
			if _, dup := r.installedAs(in.id); dup {
				d.Fail("restore %x installed twice", in.id)
			}
			r.installed = append(r.installed, in)
		}
		switch staged := d.Byte(); {
		case d.Err != nil:
			return
		case staged > 1:
			d.Fail("staged flag %d", staged)
		case staged == 0 && (n != 1 || installed == 0):
			d.Fail("restores section of %d records, %d installs, nothing staged", n, installed)
		case staged == 1:
			s := &staging{id: [16]byte(d.owner()), total: d.Uvarint(), size: d.Uvarint(), last: d.Uvarint()}
			chunks := d.Uvarint()
			switch {
			case d.Err != nil:
			case s.id == [16]byte{}:
				d.Fail("staging without an id")
			case s.total == 0 || s.total > fsmwire.MaxRestoreStaged || s.size == 0 || s.size > s.total:
				d.Fail("staging of %d of %d bytes", s.size, s.total)
			case s.last > st.index:
				d.Fail("staging extended at %d, beyond the applied index %d", s.last, st.index)
			case chunks != uint64(n-1):
				d.Fail("staging of %d chunks in %d records", chunks, n-1)
			}
			s.chunks = make([][]byte, 0, min(chunks, uint64(n)))
			r.staging = s
		}
	},
}

// stagedSize is the number of bytes in chunks.
func stagedSize(chunks [][]byte) uint64 {
	var n uint64
	for _, c := range chunks {
		n += uint64(len(c))
	}
	return n
}

// fields lists an install's numbers in their snapshot order.
func (in *installedRestore) fields() [9]uint64 {
	s := &in.sum
	return [9]uint64{in.index, uint64(s.Sessions), uint64(s.Locks), uint64(s.Held), uint64(s.Waiters),
		uint64(s.BackupLastToken), uint64(s.LastToken), uint64(s.SessionOffset), s.BackupIndex}
}

// decodeFields reads what fields lists.
func (in *installedRestore) decodeFields(d *decoder) {
	s := &in.sum
	in.index = d.Uvarint()
	s.Sessions, s.Locks, s.Held, s.Waiters = d.Int(), d.Int(), d.Int(), d.Int()
	s.BackupLastToken, s.LastToken = lockinfo.Token(d.Uvarint()), lockinfo.Token(d.Uvarint())
	if off := d.Uvarint(); off > math.MaxInt64 {
		d.Fail("session offset out of range")
	} else {
		s.SessionOffset = lockinfo.SessionID(off)
	}
	s.BackupIndex = d.Uvarint()
}
