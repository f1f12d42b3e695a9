package floorsys

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// The forward: a follower sends its callers' commands to the leader over
// one TCP connection, each as a request frame (an 8-byte id, the command),
// and the leader answers each with a reply frame (the id, the result byte).
// Both sides write whatever is queued in one write, so frames queued
// together travel together; the leader queues an entry's replies together.
const (
	requestSize = 8 + cmdSize
	replySize   = 8 + 1
)

// frameWriter coalesces frames queued by many goroutines into one write per
// wake-up of its goroutine.
type frameWriter struct {
	mu     sync.Mutex
	buf    []byte
	spare  []byte
	failed bool
	wake   chan struct{} // a token: buf is not empty
}

func newFrameWriter() *frameWriter { return &frameWriter{wake: make(chan struct{}, 1)} }

// queue appends a frame and wakes the writer; false if the connection has
// failed.
func (w *frameWriter) queue(frame []byte) bool {
	ok := w.add(frame)
	w.flush()
	return ok
}

// add appends a frame without waking the writer (flush does).
func (w *frameWriter) add(frame []byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed {
		return false
	}
	w.buf = append(w.buf, frame...)
	return true
}

// flush wakes the writer.
func (w *frameWriter) flush() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run writes what is queued to c until a write fails or stop closes.
func (w *frameWriter) run(c net.Conn, stop <-chan struct{}) {
	defer w.fail()
	for {
		select {
		case <-w.wake:
		case <-stop:
			return
		}
		w.mu.Lock()
		out := w.buf
		w.buf, w.spare = w.spare[:0], out
		w.mu.Unlock()
		if len(out) == 0 {
			continue
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func (w *frameWriter) fail() {
	w.mu.Lock()
	w.failed = true
	w.mu.Unlock()
}

// client is a follower's connection to one leader.
type client struct {
	conn net.Conn
	out  *frameWriter
	stop chan struct{}

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan byte
	broken  bool
}

func dialClient(addr string) (*client, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &client{conn: conn, out: newFrameWriter(), stop: make(chan struct{}), waiting: map[uint64]chan byte{}}
	go c.out.run(conn, c.stop)
	go c.read()
	return c, nil
}

// call sends one command and waits for its result (resFailed if the
// connection breaks or stop closes first).
func (c *client) call(cmd *[cmdSize]byte, stop <-chan struct{}) byte {
	done := make(chan byte, 1)
	c.mu.Lock()
	if c.broken {
		c.mu.Unlock()
		return resFailed
	}
	c.next++
	id := c.next
	c.waiting[id] = done
	c.mu.Unlock()
	var frame [requestSize]byte
	binary.BigEndian.PutUint64(frame[:8], id)
	copy(frame[8:], cmd[:])
	if !c.out.queue(frame[:]) {
		c.close()
	}
	select {
	case res := <-done:
		return res
	case <-stop:
		return resFailed
	}
}

// read dispatches replies until the connection fails, then fails every call
// still waiting.
func (c *client) read() {
	defer c.close()
	r := bufio.NewReader(c.conn)
	var frame [replySize]byte
	for {
		if _, err := io.ReadFull(r, frame[:]); err != nil {
			return
		}
		id := binary.BigEndian.Uint64(frame[:8])
		c.mu.Lock()
		done := c.waiting[id]
		delete(c.waiting, id)
		c.mu.Unlock()
		if done != nil {
			done <- frame[8]
		}
	}
}

// close ends the connection and fails the calls waiting on it.
func (c *client) close() {
	c.mu.Lock()
	if c.broken {
		c.mu.Unlock()
		return
	}
	c.broken = true
	waiting := c.waiting
	c.waiting = map[uint64]chan byte{}
	c.mu.Unlock()
	close(c.stop)
	c.conn.Close()
	for _, done := range waiting {
		done <- resFailed
	}
}

// serve answers forwarded commands on l through g until l is closed.
func serve(l net.Listener, g *groupCommit, stop <-chan struct{}, conns *sync.WaitGroup) {
	for {
		conn, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select { // a transient error (out of descriptors): do not spin
			case <-time.After(10 * time.Millisecond):
			case <-stop:
				return
			}
			continue
		}
		conns.Go(func() { serveConn(conn, g, stop) })
	}
}

// serveConn reads request frames and queues each command for the next
// entry; the replies go out through one frameWriter.
func serveConn(conn net.Conn, g *groupCommit, stop <-chan struct{}) {
	defer conn.Close()
	out := newFrameWriter()
	done := make(chan struct{})
	defer close(done)
	go out.run(conn, done)
	go func() { // unblock the read below when the replica closes
		select {
		case <-stop:
			conn.Close()
		case <-done:
		}
	}()
	r := bufio.NewReader(conn)
	for {
		var frame [requestSize]byte
		if _, err := io.ReadFull(r, frame[:]); err != nil {
			return
		}
		w := waiter{out: out, done: func(res byte) {
			var reply [replySize]byte
			copy(reply[:8], frame[:8])
			reply[8] = res
			out.add(reply[:])
		}}
		copy(w.cmd[:], frame[8:])
		g.submit(w)
	}
}

func (c *client) isBroken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken
}
