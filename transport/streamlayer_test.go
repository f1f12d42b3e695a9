package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func TestStreamLayerAcceptDialClose(t *testing.T) {
	a := startTransport(t, testConfig(nil), nil)
	b := startTransport(t, testConfig(nil), nil)
	sl := b.streamLayer()

	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := sl.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	out, err := a.streamLayer().Dial(raftAddr(b), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	in, ok := <-accepted
	if !ok {
		t.Fatal("Accept failed")
	}
	// Bytes flow both ways after the preface.
	out.Write(raftMsg)
	buf := make([]byte, len(raftMsg))
	if _, err := io.ReadFull(in, buf); err != nil || string(buf) != string(raftMsg) {
		t.Fatalf("read %q, %v", buf, err)
	}

	// Closing the stream layer closes its raft connections (so a blocked
	// raft read returns) and fails Accept and Dial; RPC keeps working.
	readErr := make(chan error, 1)
	go func() {
		_, err := in.Read(buf)
		readErr <- err
	}()
	if err := sl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-readErr; err != io.EOF {
		t.Fatalf("blocked read after Close = %v, want io.EOF", err)
	}
	if _, err := sl.Accept(); !errors.Is(err, ErrClosed) || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close = %v", err)
	}
	if _, err := sl.Dial(raftAddr(a), time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("Dial after Close = %v", err)
	}
	if err := sl.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	out.Close()

	// WaitRaftConns waits for the user (raft's handler goroutine) to close
	// the accepted connection, even after Close broke it.
	b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := b.WaitRaftConns(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitRaftConns with the accepted connection open = %v", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- b.WaitRaftConns(context.Background()) }()
	in.Close()
	in.Close() // counted once
	if err := <-waited; err != nil {
		t.Fatalf("WaitRaftConns after the connection closed = %v", err)
	}
}

func TestStreamLayerUnacceptedConnDropped(t *testing.T) {
	// No raft transport runs on b: an inbound raft connection is dropped
	// after HandshakeTimeout instead of pinning a goroutine forever.
	cfg := testConfig(nil)
	cfg.Inbound.HandshakeTimeout = 100 * time.Millisecond
	rej := watchRejects(&cfg)
	b := startTransport(t, cfg, nil)
	a := startTransport(t, testConfig(nil), nil)
	c, err := a.streamLayer().Dial(raftAddr(b), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	expectReject(t, b, rej, rejectNotAccepted)
}

func TestRaftTransportIdempotentAndClosed(t *testing.T) {
	tr, err := New(testConfig(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	nt := tr.RaftTransport()
	if tr.RaftTransport() != nt {
		t.Fatal("RaftTransport built twice")
	}
	if string(nt.LocalAddr()) != tr.Addr() {
		t.Fatalf("LocalAddr %s, Addr %s", nt.LocalAddr(), tr.Addr())
	}
	tr.Close()
	if !nt.IsShutdown() {
		t.Fatal("Close did not close the NetworkTransport")
	}

	tr2, err := New(testConfig(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	tr2.Close()
	if !tr2.RaftTransport().IsShutdown() {
		t.Fatal("RaftTransport after Close is not shut down")
	}
}

func TestCloseIsIdempotentAndConcurrent(t *testing.T) {
	tr, err := New(testConfig(nil), echo)
	if err != nil {
		t.Fatal(err)
	}
	cli := startTransport(t, testConfig(nil), nil)
	if _, err := cli.Call(ctxTimeout(t), tr.Addr(), nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for range 3 {
		go func() { tr.Close(); done <- struct{}{} }()
	}
	for range 3 {
		<-done
	}
	// The listener is gone.
	if c, err := net.Dial("tcp", tr.Addr()); err == nil {
		c.Close()
		t.Fatal("listener still accepting after Close")
	}
}
