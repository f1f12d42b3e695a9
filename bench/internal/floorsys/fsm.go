package floorsys

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"

	"github.com/hashicorp/raft"
)

// A command is cmdSize bytes: op, the name's length, the name, zero padding,
// and in its last 8 bytes the waiter id the leader's group commit gives a
// Lock when it puts it in an entry (big-endian; see groupCommit.commit). An
// entry is a run of commands; the state machine answers it with an
// *applied: one result byte per command and the waiters it granted.
const (
	cmdSize = 64
	idAt    = cmdSize - 8
	maxName = idAt - 2

	opLock   = 1
	opUnlock = 2

	resOK      = 0 // done (a Lock: granted)
	resRefused = 1 // Unlock of a free name
	resFailed  = 2 // not committed (no leader, lost connection, shut down)
	resQueued  = 3 // a Lock of a held name: in line (granted later, by an Unlock)
)

// encodeCommand writes op on name into dst (cmdSize bytes, no waiter id).
func encodeCommand(dst []byte, op byte, name string) error {
	if len(name) > maxName {
		return fmt.Errorf("floor: name of %d bytes (at most %d)", len(name), maxName)
	}
	clear(dst[:cmdSize])
	dst[0], dst[1] = op, byte(len(name))
	copy(dst[2:], name)
	return nil
}

// applied is what Apply returns for an entry.
type applied struct {
	res    []byte   // per command
	grants []uint64 // the waiter ids an Unlock of the entry handed its name to, in order
}

// heldNames is the state machine: the names held, each with its line of
// waiter ids (FIFO). Unlock of a name with a line hands it to the first
// waiter (the name stays held); without one it frees the name. hashicorp/raft
// calls Apply, Snapshot and Restore from one goroutine; mu is for the
// leader's group commit, which asks wouldQueue from another.
type heldNames struct {
	mu   sync.Mutex
	held map[string][]uint64
}

func newHeldNames() *heldNames { return &heldNames{held: map[string][]uint64{}} }

// wouldQueue reports whether a Lock of name would join a line now.
func (h *heldNames) wouldQueue(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, held := h.held[name]
	return held
}

// commandName returns the name of an encoded command (empty if malformed).
func commandName(c *[cmdSize]byte) string {
	if int(c[1]) > maxName {
		return ""
	}
	return string(c[2 : 2+int(c[1])])
}

// Apply runs an entry's commands in order; bytes that are not a whole
// command are refused.
func (h *heldNames) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand || len(l.Data)%cmdSize != 0 {
		return &applied{}
	}
	out := &applied{res: make([]byte, len(l.Data)/cmdSize)}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range out.res {
		c := l.Data[i*cmdSize : (i+1)*cmdSize]
		n := int(c[1])
		if n > maxName {
			out.res[i] = resRefused
			continue
		}
		name := string(c[2 : 2+n])
		line, held := h.held[name]
		switch {
		case c[0] == opLock && !held:
			h.held[name] = nil
		case c[0] == opLock:
			h.held[name] = append(line, binary.BigEndian.Uint64(c[idAt:]))
			out.res[i] = resQueued
		case c[0] == opUnlock && held && len(line) > 0:
			out.grants = append(out.grants, line[0])
			h.held[name] = line[1:]
		case c[0] == opUnlock && held:
			delete(h.held, name)
		default:
			out.res[i] = resRefused
		}
	}
	return out
}

// Snapshot copies the names and lines; Persist writes them (sorted by name,
// each as its length-prefixed name, the line's length and its ids).
func (h *heldNames) Snapshot() (raft.FSMSnapshot, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := make(namesSnapshot, len(h.held))
	for n, line := range h.held {
		s[n] = slices.Clone(line)
	}
	return s, nil
}

// Restore replaces the names with a snapshot's.
func (h *heldNames) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	held := map[string][]uint64{}
	var size [2]byte
	for {
		if _, err := io.ReadFull(rc, size[:]); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("floor: snapshot: %w", err)
		}
		name := make([]byte, binary.BigEndian.Uint16(size[:]))
		var count [4]byte
		if _, err := io.ReadFull(rc, name); err != nil {
			return fmt.Errorf("floor: snapshot: %w", err)
		}
		if _, err := io.ReadFull(rc, count[:]); err != nil {
			return fmt.Errorf("floor: snapshot: %w", err)
		}
		ids := make([]byte, 8*int(binary.BigEndian.Uint32(count[:])))
		if _, err := io.ReadFull(rc, ids); err != nil {
			return fmt.Errorf("floor: snapshot: %w", err)
		}
		var line []uint64
		for i := 0; i < len(ids); i += 8 {
			line = append(line, binary.BigEndian.Uint64(ids[i:]))
		}
		held[string(name)] = line
	}
	h.mu.Lock()
	h.held = held
	h.mu.Unlock()
	return nil
}

type namesSnapshot map[string][]uint64

func (s namesSnapshot) Persist(sink raft.SnapshotSink) error {
	var buf []byte
	for _, n := range slices.Sorted(maps.Keys(s)) {
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(n)))
		buf = append(buf, n...)
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(s[n])))
		for _, id := range s[n] {
			buf = binary.BigEndian.AppendUint64(buf, id)
		}
	}
	if _, err := sink.Write(buf); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (namesSnapshot) Release() {}
