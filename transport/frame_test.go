package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"slices"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/memnet"
)

func TestFrameRoundTrip(t *testing.T) {
	for _, h := range []header{
		{kind: kindRequest, id: 1, aux: 12345, length: 3},
		{kind: kindResponse, id: 1<<64 - 1, length: 0},
		{kind: kindError, code: codeHandler, id: 7, length: 5},
		{kind: kindCancel, id: 9},
		{kind: kindPing},
		{kind: kindPong},
	} {
		payload := bytes.Repeat([]byte{'p'}, int(h.length))
		f := newFrame(h.kind, h.code, h.id, h.aux, payload)
		var hdr [headerLen]byte
		got, gotPayload, err := readFrame(bytes.NewReader(f), &hdr, 1<<20)
		if err != nil {
			t.Fatalf("%+v: %v", h, err)
		}
		if got != h || !bytes.Equal(gotPayload, payload) {
			t.Fatalf("round trip: got %+v %q, want %+v %q", got, gotPayload, h, payload)
		}
	}
}

func TestFrameRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    []byte
		want error
	}{
		{"kind 0", newFrame(0, 0, 1, 0, nil), errProtocol},
		{"kind 7", newFrame(7, 0, 1, 0, nil), errProtocol},
		{"code on request", newFrame(kindRequest, 1, 1, 0, nil), errProtocol},
		{"error without code", newFrame(kindError, 0, 1, 0, nil), errProtocol},
		{"aux on response", newFrame(kindResponse, 0, 1, 5, nil), errProtocol},
		{"deadline out of range", newFrame(kindRequest, 0, 1, 1<<63, nil), errProtocol},
		{"payload on ping", newFrame(kindPing, 0, 0, 0, []byte("x")), errProtocol},
		{"too large", newFrame(kindRequest, 0, 1, 0, make([]byte, 11)), errTooLarge},
		{"huge error", newFrame(kindError, codeHandler, 1, 0, make([]byte, maxErrorLen+1)), errProtocol},
		{"reserved", func() []byte { f := newFrame(kindPing, 0, 0, 0, nil); f[3] = 1; return f }(), errProtocol},
	} {
		var hdr [headerLen]byte
		_, _, err := readFrame(bytes.NewReader(tc.f), &hdr, 10)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	var hdr [headerLen]byte
	f := newFrame(kindRequest, 0, 1, 0, []byte("abcdef"))
	if _, _, err := readFrame(bytes.NewReader(f[:len(f)-1]), &hdr, 10); err != io.ErrUnexpectedEOF {
		t.Errorf("truncated payload: %v", err)
	}
}

// FuzzReadFrame: no input makes the frame decoder panic or allocate past
// the limit, and every frame it accepts re-encodes to the bytes it read.
func FuzzReadFrame(f *testing.F) {
	f.Add(newFrame(kindRequest, 0, 1, 1000, []byte("req")))
	f.Add(append(newFrame(kindPing, 0, 0, 0, nil), newFrame(kindError, codeHandler, 3, 0, []byte("e"))...))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add(make([]byte, headerLen))
	f.Fuzz(func(t *testing.T, data []byte) {
		const max = 4096
		r := bytes.NewReader(data)
		var hdr [headerLen]byte
		for {
			off := len(data) - r.Len()
			h, payload, err := readFrame(r, &hdr, max)
			if err != nil {
				return
			}
			if len(payload) > max {
				t.Fatalf("payload of %d bytes accepted with limit %d", len(payload), max)
			}
			consumed := data[off : len(data)-r.Len()]
			if re := newFrame(h.kind, h.code, h.id, h.aux, payload); !bytes.Equal(re, consumed) {
				t.Fatalf("re-encoding differs:\n%x\n%x", re, consumed)
			}
		}
	})
}

// FuzzPreface: parsePreface accepts exactly the known protocol types with
// a version the policy admits, and classifies everything else.
func FuzzPreface(f *testing.F) {
	f.Add(protoRaft, versionLegacy)
	f.Add(protoRPC, versionHello)
	f.Add(byte(0x16), byte(3))
	f.Fuzz(func(t *testing.T, a, b byte) {
		for _, p := range []prefacePolicy{{}, {legacy: true}, {hello: true}, {legacy: true, hello: true}} {
			proto, version, err := parsePreface([prefaceLen]byte{a, b}, p)
			valid := (a == protoRaft || a == protoRPC) &&
				((b == versionLegacy && p.legacy) || (b == versionHello && p.hello))
			if valid != (err == nil) || (valid && (proto != a || version != b)) {
				t.Fatalf("parsePreface(%#x, %#x, %+v) = %#x, %d, %v", a, b, p, proto, version, err)
			}
			var pe *prefaceError
			if err != nil && (!errors.As(err, &pe) || (pe.reason != rejectUnknownType && pe.reason != rejectBadVersion && pe.reason != rejectLegacy)) {
				t.Fatalf("unclassified error %v", err)
			}
		}
	})
}

// FuzzListener feeds arbitrary bytes to a live transport's listener (over
// memnet, inside a synctest bubble so a silent input costs no real time):
// nothing panics, every goroutine ends on Close, and the node still answers
// a well-formed call afterwards.
func FuzzListener(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0xFF, 0x01})
	f.Add([]byte{protoRaft, versionLegacy, 0, 1, 2})
	f.Add(append([]byte{protoRPC, versionLegacy}, newFrame(kindRequest, 0, 1, 100, []byte("x"))...))
	f.Add(append([]byte{protoRPC, versionLegacy}, newFrame(kindCancel, 0, 1, 0, nil)...))
	f.Add(append([]byte{protoRPC, versionLegacy}, newFrame(kindRequest, 0, 1, 0, []byte("x"))[:20]...))
	f.Add(append([]byte{protoRPC, 3}, 1, 2, 3))
	hi := encodeHello(hello{id: Identity{NodeID: "fuzz"}})
	f.Add(slices.Concat([]byte{protoRPC, versionHello}, hi, encodeMsg(msgAccept, nil), newFrame(kindRequest, 0, 1, 0, []byte("x"))))
	f.Add(slices.Concat([]byte{protoRaft, versionHello}, hi, encodeMsg(msgAccept, nil), []byte{0, 0, 0, 0, 0, 0, 0, 2, 0, 0x80}))
	f.Add(slices.Concat([]byte{protoRaft, versionHello}, hi, encodeRefuse("no")))
	f.Add(slices.Concat([]byte{protoRPC, versionHello}, []byte{msgHello, 0, 1, 9}))
	f.Fuzz(func(t *testing.T, data []byte) {
		synctest.Test(t, func(t *testing.T) {
			n := memnet.New()
			defer n.Close()
			srv := memTransport(t, n, "srv", echo, nil)
			defer srv.Close()
			c, err := n.Host("fuzz").Dial(context.Background(), srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			c.Write(data)
			// Drain whatever the server says until it closes or goes quiet.
			go io.Copy(io.Discard, bufio.NewReader(c))
			synctest.Wait()
			c.Close()

			cli := memTransport(t, n, "cli", nil, nil)
			defer cli.Close()
			if resp, err := cli.Call(context.Background(), srv.Addr(), []byte("ok")); err != nil || string(resp) != "echo:ok" {
				t.Fatalf("node broken by input %x: %q, %v", data, resp, err)
			}
		})
	})
}

// A frame header declaring a large payload costs memory only as payload
// bytes arrive (issue 20 #4): a header declaring 16 MiB followed by 10
// bytes allocates far less than 16 MiB.
func TestReadFrameGrowsWithArrivingBytes(t *testing.T) {
	f := newFrame(kindRequest, 0, 1, 0, nil)
	binary.BigEndian.PutUint32(f[4:8], 16<<20)
	in := append(f, "0123456789"...)
	var hdr [headerLen]byte
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := readFrame(bytes.NewReader(in), &hdr, 16<<20)
	runtime.ReadMemStats(&after)
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated frame: %v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("reading a header declaring 16 MiB and 10 payload bytes allocated %d bytes", got)
	}

	// A payload that does arrive is read whole, across many growth steps.
	payload := make([]byte, 3<<20+17)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	h, got, err := readFrame(iotest.OneByteReader(bytes.NewReader(newFrame(kindRequest, 0, 2, 0, payload))), &hdr, 16<<20)
	if err != nil || h.id != 2 || !bytes.Equal(got, payload) {
		t.Fatalf("payload of %d bytes: read %d bytes, %v", len(payload), len(got), err)
	}
}

// FuzzHello: no input makes the hello decoders panic or allocate past their
// bounds; every hello accepted re-encodes to the bytes read.
func FuzzHello(f *testing.F) {
	f.Add(encodeHello(hello{id: Identity{NodeID: "n1", Incarnation: "inc", ClusterID: "c1"}, idle: time.Minute}))
	f.Add(encodeHello(hello{}))
	f.Add(encodeMsg(msgAccept, nil))
	f.Add(encodeRefuse("other cluster"))
	f.Add([]byte{msgHello, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		typ, body, err := readMsg(r)
		if err != nil {
			return
		}
		if len(body) > maxHelloBody {
			t.Fatalf("body of %d bytes accepted", len(body))
		}
		consumed := data[:len(data)-r.Len()]
		switch typ {
		case msgHello:
			h, err := decodeHello(body)
			if err != nil {
				if !errors.Is(err, errProtocol) {
					t.Fatalf("unclassified hello error %v", err)
				}
				return
			}
			if checkIdentity(h.id) != nil {
				t.Fatalf("decoded identity %+v does not pass checkIdentity", h.id)
			}
			if re := encodeHello(h); !bytes.Equal(re, consumed) {
				t.Fatalf("re-encoding differs:\n%x\n%x", re, consumed)
			}
		case msgRefuse:
			if len(body) > maxReasonLen {
				t.Fatalf("reason of %d bytes accepted", len(body))
			}
		case msgAccept:
			if len(body) != 0 {
				t.Fatal("accept with a body")
			}
		default:
			t.Fatalf("message type %d accepted", typ)
		}
	})
}
