package floorsys

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/hashicorp/raft"
)

// A command is cmdSize bytes: op, the name's length, the name, zero padding.
// An entry is a run of commands; the state machine answers it with one
// result byte per command.
const (
	cmdSize = 64
	maxName = cmdSize - 2

	opLock   = 1
	opUnlock = 2

	resOK      = 0 // done
	resRefused = 1 // Lock of a held name, Unlock of a free one
	resFailed  = 2 // not committed (no leader, lost connection, shut down)
)

// encodeCommand writes op on name into dst (cmdSize bytes).
func encodeCommand(dst []byte, op byte, name string) error {
	if len(name) > maxName {
		return fmt.Errorf("floor: name of %d bytes (at most %d)", len(name), maxName)
	}
	clear(dst[:cmdSize])
	dst[0], dst[1] = op, byte(len(name))
	copy(dst[2:], name)
	return nil
}

// heldNames is the state machine: the names held. hashicorp/raft calls
// Apply and Snapshot from one goroutine, so it needs no lock.
type heldNames struct{ held map[string]struct{} }

func newHeldNames() *heldNames { return &heldNames{held: map[string]struct{}{}} }

// Apply runs an entry's commands in order and returns their results; bytes
// that are not a whole command are refused.
func (h *heldNames) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand || len(l.Data)%cmdSize != 0 {
		return []byte(nil)
	}
	out := make([]byte, len(l.Data)/cmdSize)
	for i := range out {
		c := l.Data[i*cmdSize : (i+1)*cmdSize]
		n := int(c[1])
		if n > maxName {
			out[i] = resRefused
			continue
		}
		name := string(c[2 : 2+n])
		_, held := h.held[name]
		switch {
		case c[0] == opLock && !held:
			h.held[name] = struct{}{}
		case c[0] == opUnlock && held:
			delete(h.held, name)
		default:
			out[i] = resRefused
		}
	}
	return out
}

// Snapshot copies the names; Persist writes them (length-prefixed, sorted).
func (h *heldNames) Snapshot() (raft.FSMSnapshot, error) {
	names := make([]string, 0, len(h.held))
	for n := range h.held {
		names = append(names, n)
	}
	return namesSnapshot(names), nil
}

// Restore replaces the names with a snapshot's.
func (h *heldNames) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	held := map[string]struct{}{}
	var size [2]byte
	for {
		if _, err := io.ReadFull(rc, size[:]); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("floor: snapshot: %w", err)
		}
		name := make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(rc, name); err != nil {
			return fmt.Errorf("floor: snapshot: %w", err)
		}
		held[string(name)] = struct{}{}
	}
	h.held = held
	return nil
}

type namesSnapshot []string

func (s namesSnapshot) Persist(sink raft.SnapshotSink) error {
	sort.Strings(s)
	var buf []byte
	for _, n := range s {
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(n)))
		buf = append(buf, n...)
	}
	if _, err := sink.Write(buf); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (namesSnapshot) Release() {}
