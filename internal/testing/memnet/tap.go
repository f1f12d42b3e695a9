package memnet

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Taps: a network that delivers a client's conversation twice. A Tap keeps
// a copy of what dialers write on the connections it selects, from each
// connection's first byte on; Replay later sends one such copy again, from
// the same host to the same address, on a connection of its own — as a
// middlebox that re-sends a request upstream after a timeout does, or a
// replayed TCP Fast Open SYN. The listener sees the whole conversation
// again (hand-shake included), late, after the original connection's
// requests were answered or retried; whatever it acts on, it acts on twice.
//
// A stream with per-connection secrets (a TLS handshake) cannot be
// replayed this way: the listener's side of the handshake differs and the
// copy fails it. Select plaintext connections (by Preface) only.

// Tap records what dialers write on the connections it selects. Create
// one with Network.Tap. Its methods are safe for concurrent use.
type Tap struct {
	net    *Network
	filter FlowFilter

	mu      sync.Mutex
	budget  int // bytes it may still record, over all its connections
	stopped bool
	flows   map[uint64]*tapFlow // connections with recorded bytes
}

// tapFlow is the recording of one connection. Its fields are guarded by
// the tap's mu.
type tapFlow struct {
	tap  *Tap
	info FlowInfo
	data []byte
	// done: recording of this connection has ended (a write did not fit
	// the budget, the preface did not match, or the tap stopped).
	done bool
}

// Recording is what a Tap recorded of one connection: a prefix, ending at
// a write boundary, of everything its dialer wrote.
type Recording struct {
	FlowInfo
	Data []byte
}

// Tap starts recording the bytes written by the dialer of every connection
// that f selects and that is made from now on (live connections are not
// recorded: their beginning is gone). A connection is recorded from its
// first byte, one whole Write at a time, whatever then happens to the
// bytes on the way (delayed, black-holed); its recording ends at the first
// Write that no longer fits into budget (the bytes the tap may keep over
// all its connections), so every recording is a prefix of its stream. With
// a Preface filter, a connection whose first bytes differ is dropped from
// the tap. Stop ends the recording; the recordings stay until the Tap is
// dropped.
func (n *Network) Tap(f FlowFilter, budget int) *Tap {
	t := &Tap{
		net:    n,
		filter: FlowFilter{From: f.From, To: f.To, Preface: slices.Clone(f.Preface)},
		budget: max(budget, 0),
		flows:  make(map[uint64]*tapFlow),
	}
	n.mu.Lock()
	n.taps = append(n.taps, t)
	n.mu.Unlock()
	return t
}

// Stop ends the recording: no connection is selected any more and no byte
// is added to a recording. Idempotent.
func (t *Tap) Stop() {
	n := t.net
	n.mu.Lock()
	n.taps = slices.DeleteFunc(n.taps, func(x *Tap) bool { return x == t })
	n.mu.Unlock()
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
}

// selects reports whether t records a connection dialed from → to. The
// preface is checked as the bytes come (record).
func (t *Tap) selects(from, to string) bool {
	return (t.filter.From == "" || t.filter.From == from) && (t.filter.To == "" || t.filter.To == to)
}

// tapsFor returns a recording for each live tap that selects a connection
// from → to. Caller holds n.mu.
func (n *Network) tapsFor(from, to string, info FlowInfo) []*tapFlow {
	var out []*tapFlow
	for _, t := range n.taps {
		if t.selects(from, to) {
			out = append(out, &tapFlow{tap: t, info: info})
		}
	}
	return out
}

// record adds one Write's bytes to the recording of its connection. The
// caller holds the connection's pipe mutex (a tap's mu nests inside it;
// Tap methods never take a pipe's).
func (tf *tapFlow) record(b []byte) {
	t := tf.tap
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case tf.done:
		return
	case t.stopped || len(b) > t.budget:
		tf.done = true
		return
	}
	if pre := t.filter.Preface; len(tf.data) < len(pre) {
		k := min(len(pre)-len(tf.data), len(b))
		if !bytes.Equal(b[:k], pre[len(tf.data):len(tf.data)+k]) {
			tf.done = true
			t.budget += len(tf.data)
			tf.data = nil
			delete(t.flows, tf.info.ID)
			return
		}
	}
	tf.data = append(tf.data, b...)
	t.budget -= len(b)
	t.flows[tf.info.ID] = tf
}

// Recordings returns the recordings of the connections the tap selected,
// oldest connection first (a connection whose dialer has not yet written
// its whole Preface is left out). The data are copies.
func (t *Tap) Recordings() []Recording {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Recording
	for _, tf := range t.flows {
		if len(tf.data) < len(t.filter.Preface) {
			continue
		}
		info := tf.info
		info.Preface = slices.Clone(tf.data[:min(len(tf.data), prefaceLen)])
		out = append(out, Recording{FlowInfo: info, Data: slices.Clone(tf.data)})
	}
	slices.SortFunc(out, func(a, b Recording) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// ErrNotRecorded is returned by Replay for a connection the tap holds no
// recording of.
var ErrNotRecorded = errors.New("memnet: connection not recorded")

// Replay sends the recording of connection id again: it dials the
// connection's address from its dialing host (as Host.Dial does, host-pair
// faults included), writes the recorded bytes, and then holds the new
// connection open, reading and discarding what the listener answers, until
// ctx ends or the listener closes it; then it closes it. It returns the
// number of bytes written and the dial's or the write's error (nil when
// all of them were written; ctx ending afterwards is the normal end).
func (t *Tap) Replay(ctx context.Context, id uint64) (int, error) {
	t.mu.Lock()
	tf := t.flows[id]
	var info FlowInfo
	var data []byte
	if tf != nil {
		info, data = tf.info, slices.Clone(tf.data)
	}
	t.mu.Unlock()
	if tf == nil {
		return 0, fmt.Errorf("%w: %d", ErrNotRecorded, id)
	}
	c, err := t.net.Host(info.From).Dial(ctx, info.Addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	// ctx ends the write (a listener that stopped reading) and the reads.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	k, err := c.Write(data)
	if err != nil {
		return k, err
	}
	io.Copy(io.Discard, c)
	return k, nil
}
