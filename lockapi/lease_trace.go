package lockapi

import (
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/leasetrace"
)

// The lease trace (internal/leasetrace): what a session does on the
// client's side of the lease protocol — its open, its keepalives and their
// answers, the commands it proposes, its loss — reported to the sink a test
// attached to its node. With none attached each report costs one atomic
// load.

func (s *Session) traceSink() leasetrace.Sink { return leasetrace.For(s.n) }

func (s *Session) traceOpened(sent time.Time) {
	if t := s.traceSink(); t != nil {
		t.Record(leasetrace.Event{At: time.Now().UnixNano(), Kind: leasetrace.Opened, Session: uint64(s.id), Sent: sent.UnixNano(),
			Deadline: s.validUntil.UnixNano()})
	}
}

func (s *Session) traceKeepAliveSent(sent time.Time) {
	if t := s.traceSink(); t != nil {
		t.Record(leasetrace.Event{At: sent.UnixNano(), Kind: leasetrace.KeepAliveSent, Session: uint64(s.id)})
	}
}

// traceKeepAliveResult reports the answer to the keepalive sent at sent
// (verdict "": renewed, valid until ValidUntil).
func (s *Session) traceKeepAliveResult(sent time.Time, verdict string) {
	if t := s.traceSink(); t != nil {
		e := leasetrace.Event{At: time.Now().UnixNano(), Kind: leasetrace.KeepAliveResult, Session: uint64(s.id), Sent: sent.UnixNano(), Verdict: verdict}
		if verdict == "" {
			e.Deadline = s.ValidUntil().UnixNano()
		}
		t.Record(e)
	}
}

func (s *Session) traceLost(why string) {
	if t := s.traceSink(); t != nil {
		t.Record(leasetrace.Event{At: time.Now().UnixNano(), Kind: leasetrace.Lost, Session: uint64(s.id), Verdict: why})
	}
}

// traceCommand reports a command the session proposes (as an entry of
// that one command).
func (s *Session) traceCommand(cmd fsm.Command) {
	if t := s.traceSink(); t != nil {
		data, err := fsm.EncodeEntry(fsm.Entry{At: time.Now().UnixNano(), Commands: []fsm.Command{cmd}})
		if err != nil {
			return
		}
		t.Record(leasetrace.Event{At: time.Now().UnixNano(), Kind: leasetrace.Command, Session: uint64(s.id), Data: data})
	}
}
