package hclogslog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func newBuf(level slog.Level) (*bytes.Buffer, *Logger) {
	var buf bytes.Buffer
	h := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})
	return &buf, New(slog.New(h), "raft")
}

func TestLevelsNamesAndArgs(t *testing.T) {
	buf, l := newBuf(slog.LevelDebug)
	l.Trace("hidden")
	l.Debug("dbg", "k", 1)
	l.Named("net").With("peer", "b").Warn("slow")
	l.ResetNamed("other").Error("bad")
	out := buf.String()
	for _, want := range []string{
		`level=DEBUG msg=dbg k=1 logger=raft`,
		`level=WARN msg=slow peer=b logger=raft.net`,
		`level=ERROR msg=bad logger=other`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hidden") {
		t.Errorf("trace emitted at debug level:\n%s", out)
	}
	if l.IsTrace() || !l.IsDebug() || l.GetLevel() != hclog.Debug {
		t.Errorf("IsTrace=%v IsDebug=%v GetLevel=%v", l.IsTrace(), l.IsDebug(), l.GetLevel())
	}
	l.SetLevel(hclog.Warn)
	if l.IsInfo() || !l.IsWarn() || l.GetLevel() != hclog.Warn {
		t.Errorf("after SetLevel(Warn): IsInfo=%v GetLevel=%v", l.IsInfo(), l.GetLevel())
	}
	if got := l.With("a", 1).ImpliedArgs(); len(got) != 2 {
		t.Errorf("ImpliedArgs = %v", got)
	}
	l.SetLevel(hclog.NoLevel)
	l.StandardLogger(nil).Print("from std")
	if !strings.Contains(buf.String(), `level=INFO msg="from std" logger=raft`) {
		t.Errorf("standard logger output missing:\n%s", buf.String())
	}
}

func TestNilDiscards(t *testing.T) {
	l := New(nil, "")
	l.Error("nothing")
	if l.IsError() {
		t.Fatal("nil logger enabled")
	}
}

func TestHclogFormatArgs(t *testing.T) {
	buf, l := newBuf(slog.LevelInfo)
	l.Info("fmt", "servers", hclog.Fmt("%d-%s", 7, "x"), "hex", hclog.Hex(255), "q", hclog.Quote("a b"), "plain", 3)
	want := `msg=fmt servers=7-x hex=0xff q="\"a b\"" plain=3 logger=raft`
	if !strings.Contains(buf.String(), want) {
		t.Fatalf("got %s\nwant %s", buf.String(), want)
	}
}

// A cluster's first election is no warning: raft's "heartbeat timeout
// reached" with no leader ever known is logged at INFO (issue 16: WARN on
// every single-node start); losing a known leader stays a WARN.
func TestFirstElectionIsInfo(t *testing.T) {
	buf, l := newBuf(slog.LevelInfo)
	l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "", "last-leader-id", "")
	l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "10.0.0.2:7400", "last-leader-id", "r2~abc")
	out := buf.String()
	if !strings.Contains(out, `level=INFO msg="heartbeat timeout reached, starting election" last-leader-addr="" last-leader-id=""`) ||
		!strings.Contains(out, `level=WARN msg="heartbeat timeout reached, starting election" last-leader-addr=10.0.0.2:7400`) {
		t.Errorf("levels:\n%s", out)
	}
}

// What a pause, a restart or a graceful leave makes raft log is no ERROR:
// a deposed leader and an unreachable peer are WARN, a connection the peer
// closed is DEBUG; other errors stay errors.
func TestNormalOperationIsNoError(t *testing.T) {
	buf, l := newBuf(slog.LevelDebug)
	l.Error("peer has newer term, stopping replication", "peer", "r2")
	l.Error("failed to appendEntries to", "peer", "r3", "error", "connect: connection refused")
	l.Error("failed to heartbeat to", "peer", "r3", "error", "EOF")
	l.Error("failed to make requestVote RPC", "target", "r3")
	l.Error("failed to decode incoming command", "error", "read: connection reset by peer")
	l.Error("failed to decode incoming command", "error", "msgpack: bad length")
	l.Error("failed to take snapshot", "error", "disk full")
	out := buf.String()
	for _, want := range []string{
		`level=WARN msg="peer has newer term`, `level=WARN msg="failed to appendEntries to"`, `level=WARN msg="failed to heartbeat to"`,
		`level=WARN msg="failed to make requestVote RPC"`, `level=DEBUG msg="failed to decode incoming command" error="read: connection reset by peer"`,
		`level=ERROR msg="failed to decode incoming command" error="msgpack: bad length"`, `level=ERROR msg="failed to take snapshot"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
