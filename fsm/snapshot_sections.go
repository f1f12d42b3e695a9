package fsm

import (
	"encoding/binary"
	"fmt"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// snapshotSection is one optional part of a version-4 snapshot: state that
// the session and lock records cannot carry. A section is written after the
// locks as a header record (tag, number of records) followed by its own
// records, each at most maxSnapshotRecord bytes; it is left out when it has
// nothing to carry, so that a state without it gives the same bytes as
// before the section existed.
type snapshotSection struct {
	tag  uint64 // part of the format: never renumbered or reused
	name string // for errors
	// records returns how many records the section writes for st; 0
	// leaves it out.
	records func(st *state) int
	// encode appends record i (of records(st)) to rec.
	encode func(st *state, i int, rec []byte) []byte
	// decode reads record i of n into st; the locks and sessions are
	// already read. It must check what it reads (a snapshot is outside
	// input) and fail through d.
	decode func(st *state, i, n int, d *decoder)
	// prepare and begin, when set, replace records, encode and decode for
	// a section that carries something from one record to the next (an
	// order, a sorted list): prepare returns how many records the section
	// writes for st and their encoder, called for i = 0..n-1 in order;
	// begin returns the decoder of one snapshot's records of the section,
	// called in order, with decode's contract.
	prepare func(st *state) (n int, encode func(i int, rec []byte) []byte)
	begin   func(st *state) func(i, n int, d *decoder)
}

// snapshotSections lists the sections in ascending tag order. A feature
// whose state needs one adds its row here (and its cluster version to the
// table in version.go).
var snapshotSections = []snapshotSection{
	restoresSection, // tag 1 (restore_section.go)
	renewalsSection, // tag 2 (renewed.go)
	{tag: fairSectionTag, name: "fair shares", prepare: prepareFairSection, begin: beginFairSection}, // fairshare_snapshot.go
}

// sectionWrite is a section that has something to write, with its count
// and the encoder of its records.
type sectionWrite struct {
	sec    *snapshotSection
	n      int
	encode func(i int, rec []byte) []byte
}

// sectionsToWrite returns the sections st has content for, in tag order.
func (st *state) sectionsToWrite() []sectionWrite {
	var out []sectionWrite
	for i := range snapshotSections {
		sec := &snapshotSections[i]
		if sec.prepare != nil {
			if n, enc := sec.prepare(st); n > 0 {
				out = append(out, sectionWrite{sec: sec, n: n, encode: enc})
			}
			continue
		}
		if n := sec.records(st); n > 0 {
			out = append(out, sectionWrite{sec: sec, n: n, encode: func(i int, rec []byte) []byte { return sec.encode(st, i, rec) }})
		}
	}
	return out
}

// write writes the section's header record and its records.
func (s sectionWrite) write(w *snapWriter) {
	w.rec = binary.AppendUvarint(w.rec, s.sec.tag)
	w.rec = binary.AppendUvarint(w.rec, uint64(s.n))
	w.put()
	for i := 0; i < s.n && w.err == nil; i++ {
		w.rec = s.encode(i, w.rec)
		w.put()
	}
}

// decodeSections reads n sections into st.
func (st *state) decodeSections(sr *snapReader, n uint64) error {
	if n > uint64(len(snapshotSections)) {
		return fmt.Errorf("%w: %w: %d snapshot sections (this binary knows %d)", fsmwire.ErrInvalidSnapshot, fsmwire.ErrUnsupportedVersion, n, len(snapshotSections))
	}
	var last uint64
	for i := uint64(0); i < n; i++ {
		d, err := sr.record()
		if err != nil {
			return snapErr("section %d: %v", i, err)
		}
		tag, records := d.Uvarint(), d.Uvarint()
		if err := d.End(); err != nil {
			return snapErr("section %d: %v", i, err)
		}
		sec := sectionByTag(tag)
		switch {
		case sec == nil:
			return fmt.Errorf("%w: %w: snapshot section %d", fsmwire.ErrInvalidSnapshot, fsmwire.ErrUnsupportedVersion, tag)
		case i > 0 && tag <= last:
			return snapErr("section %d after section %d", tag, last)
		case records == 0 || records > maxQuota:
			return snapErr("section %s: %d records", sec.name, records)
		}
		last = tag
		decode := func(i, n int, d *decoder) { sec.decode(st, i, n, d) }
		if sec.begin != nil {
			decode = sec.begin(st)
		}
		for j := 0; j < int(records); j++ {
			d, err := sr.record()
			if err != nil {
				return snapErr("section %s, record %d: %v", sec.name, j, err)
			}
			decode(j, int(records), &d)
			if err := d.End(); err != nil {
				return snapErr("section %s, record %d: %v", sec.name, j, err)
			}
		}
	}
	return nil
}

func sectionByTag(tag uint64) *snapshotSection {
	for i := range snapshotSections {
		if snapshotSections[i].tag == tag {
			return &snapshotSections[i]
		}
	}
	return nil
}
