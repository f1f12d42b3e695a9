package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// captureConn records what raft writes and answers every read with EOF, so
// each RPC fails right after its request was written.
type captureConn struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *captureConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(b)
}
func (c *captureConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (c *captureConn) Close() error                     { return nil }
func (c *captureConn) LocalAddr() net.Addr              { return fakeAddr("capture") }
func (c *captureConn) RemoteAddr() net.Addr             { return fakeAddr("capture") }
func (c *captureConn) SetDeadline(time.Time) error      { return nil }
func (c *captureConn) SetReadDeadline(time.Time) error  { return nil }
func (c *captureConn) SetWriteDeadline(time.Time) error { return nil }

// captureLayer is a raft.StreamLayer whose every dial returns one shared
// captureConn.
type captureLayer struct {
	conn   *captureConn
	closed chan struct{}
}

func (l *captureLayer) Accept() (net.Conn, error) { <-l.closed; return nil, net.ErrClosed }
func (l *captureLayer) Close() error              { close(l.closed); return nil }
func (l *captureLayer) Addr() net.Addr            { return fakeAddr("capture") }
func (l *captureLayer) Dial(raft.ServerAddress, time.Duration) (net.Conn, error) {
	return l.conn, nil
}

// raftRequests returns the bytes hashicorp/raft's NetworkTransport writes
// for one request of every kind, the largest legitimate AppendEntries
// (1024 entries) and an InstallSnapshot whose data looks like hostile
// msgpack.
func raftRequests(t testing.TB) []byte {
	l := &captureLayer{conn: &captureConn{}, closed: make(chan struct{})}
	nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: l, MaxPool: 1, Timeout: time.Second})
	defer nt.Close()
	rnd := rand.New(rand.NewPCG(3, 4))
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n1"), Addr: []byte("n1:7000")}
	var entries []*raft.Log
	for i := range 1024 {
		data := make([]byte, rnd.IntN(600))
		for j := range data {
			data[j] = byte(rnd.IntN(256))
		}
		entries = append(entries, &raft.Log{Index: uint64(i + 1), Term: 7, Type: raft.LogCommand, Data: data,
			Extensions: []byte("ext"), AppendedAt: time.Unix(1700000000, int64(i))})
	}
	nt.AppendEntries("n2", "n2", &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 7, PrevLogEntry: 3, PrevLogTerm: 6, Entries: entries, LeaderCommitIndex: 1}, &raft.AppendEntriesResponse{})
	nt.AppendEntries("n2", "n2", &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 7}, &raft.AppendEntriesResponse{})
	nt.RequestVote("n2", "n2", &raft.RequestVoteRequest{RPCHeader: hdr, Term: 8, LastLogIndex: 1 << 40, LastLogTerm: 7, LeadershipTransfer: true}, &raft.RequestVoteResponse{})
	nt.RequestPreVote("n2", "n2", &raft.RequestPreVoteRequest{RPCHeader: hdr, Term: 9, LastLogIndex: 5}, &raft.RequestPreVoteResponse{})
	nt.TimeoutNow("n2", "n2", &raft.TimeoutNowRequest{RPCHeader: hdr}, &raft.TimeoutNowResponse{})
	snap := bytes.Repeat([]byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0xdd}, 20000)
	nt.InstallSnapshot("n2", "n2", &raft.InstallSnapshotRequest{RPCHeader: hdr, SnapshotVersion: 1, Term: 7, LastLogIndex: 900,
		LastLogTerm: 7, Configuration: []byte("conf"), ConfigurationIndex: 2, Size: int64(len(snap))}, &raft.InstallSnapshotResponse{}, bytes.NewReader(snap))
	nt.AppendEntries("n2", "n2", &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 7, Entries: entries[:3]}, &raft.AppendEntriesResponse{})
	l.conn.mu.Lock()
	defer l.conn.mu.Unlock()
	return bytes.Clone(l.conn.buf.Bytes())
}

// feedChunks feeds b to a fresh guard in pieces of random size.
func feedChunks(g *raftGuard, b []byte, rnd *rand.Rand) error {
	for len(b) > 0 {
		n := min(len(b), 1+rnd.IntN(70000))
		if err := g.feed(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// Every request raft sends passes the guard, however the stream is cut,
// and the guard ends at a request boundary (it skipped the snapshot data).
func TestRaftGuardPassesRaftTraffic(t *testing.T) {
	stream := raftRequests(t)
	if len(stream) < 1024*300+120000 {
		t.Fatalf("captured only %d bytes of raft traffic", len(stream))
	}
	rnd := rand.New(rand.NewPCG(5, 6))
	for range 50 {
		var g raftGuard
		if err := feedChunks(&g, stream, rnd); err != nil {
			t.Fatalf("raft traffic refused: %v", err)
		}
		if g.st != guardRPC || g.depth != 0 {
			t.Fatalf("guard ended in state %d at depth %d, want a request boundary", g.st, g.depth)
		}
	}
	var g raftGuard
	for i := range stream {
		if err := g.feed(stream[i : i+1]); err != nil {
			t.Fatalf("raft traffic refused byte by byte at %d: %v", i, err)
		}
	}
}

// Requests that would make raft's decoder allocate far more than they
// sent are refused as soon as their header arrives.
func TestRaftGuardRefuses(t *testing.T) {
	entries := func(n uint32, elem []byte) []byte {
		b := []byte{0, 0x81, 0xa7}
		b = append(b, "Entries"...)
		b = append(b, 0xdd)
		b = binary.BigEndian.AppendUint32(b, n)
		for range min(n, 2000) {
			b = append(b, elem...)
		}
		return b
	}
	deep := []byte{0}
	for range 9 {
		deep = append(deep, 0x91)
	}
	bigMap := []byte{0, 0xde, 0, 65}
	manyValues := []byte{0, 0xdc, 0x04, 0x00} // 1024 maps of 20 pairs
	for range 1024 {
		manyValues = append(manyValues, 0xde, 0, 20)
		for range 20 {
			manyValues = append(manyValues, 1, 2)
		}
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"unknown rpc type", []byte{9, 0x80}, "unknown Raft RPC type 9"},
		{"entries declared 1<<30", entries(1<<30, nil), "container of 1073741824 elements"},
		{"1025 empty entries", entries(1025, []byte{0x80}), "container of 1025 elements"},
		{"deep nesting", deep, "nested deeper than 8"},
		{"big map", bigMap, "container of 65 elements"},
		{"too many values", manyValues, "more than 32768 values"},
		{"reserved type byte", []byte{0, 0xc1}, "invalid msgpack type byte 0xc1"},
	} {
		var g raftGuard
		err := g.feed(tc.in)
		if !errors.Is(err, errProtocol) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// 1024 empty entries (the most raft sends) pass.
	var g raftGuard
	if err := g.feed(entries(1024, []byte{0x80})); err != nil || g.st != guardRPC {
		t.Fatalf("1024 entries: %v (state %d)", err, g.st)
	}
}

// FuzzRaftGuard: no input panics the guard, and its verdict does not depend
// on how the stream is cut.
func FuzzRaftGuard(f *testing.F) {
	f.Add(raftRequests(f)[:4096], uint8(7))
	f.Add(partialAppendEntries(), uint8(1))
	f.Add([]byte{2, 0x81, 0xa4, 'S', 'i', 'z', 'e', 0x03, 1, 2, 3, 0, 0x80}, uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		var whole, pieces raftGuard
		errWhole := whole.feed(data)
		var errPieces error
		step := int(cut%64) + 1
		for i := 0; i < len(data) && errPieces == nil; i += step {
			errPieces = pieces.feed(data[i:min(i+step, len(data))])
		}
		if (errWhole == nil) != (errPieces == nil) {
			t.Fatalf("verdict depends on the cut: whole %v, pieces of %d: %v", errWhole, step, errPieces)
		}
		if errWhole == nil && (whole.st != pieces.st || whole.depth != pieces.depth || whole.skip != pieces.skip) {
			t.Fatalf("state depends on the cut: %+v vs %+v", whole, pieces)
		}
	})
}
