// Package hclogslog adapts log/slog to the hclog.Logger interface that
// hashicorp/raft and its NetworkTransport take, so raftlock logs through one
// *slog.Logger. It imports nothing of raftlock.
package hclogslog

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// LevelTrace is the slog level used for hclog's Trace (below slog.LevelDebug).
const LevelTrace = slog.LevelDebug - 4

// Logger is an hclog.Logger that writes to a *slog.Logger. Its name is
// added to every record as the attribute "logger". It is safe for
// concurrent use; loggers derived with With or Named share the level set by
// SetLevel on their parent only at derivation time.
type Logger struct {
	l       *slog.Logger
	name    string
	implied []any
	level   *atomic.Int32 // minimum hclog level; NoLevel = whatever the handler enables
}

var _ hclog.Logger = (*Logger)(nil)

// New returns an hclog.Logger writing to l (nil discards everything) under
// the given name ("" for none).
func New(l *slog.Logger, name string) *Logger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	lv := new(atomic.Int32)
	return &Logger{l: l, name: name, level: lv}
}

// toSlog maps an hclog level to a slog level.
func toSlog(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return LevelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (g *Logger) enabled(level hclog.Level) bool {
	minLevel := hclog.Level(g.level.Load())
	if minLevel == hclog.Off || level == hclog.Off {
		return false
	}
	if minLevel != hclog.NoLevel && level < minLevel {
		return false
	}
	return g.l.Enabled(context.Background(), toSlog(level))
}

// Log emits msg at level with alternating key/value args.
func (g *Logger) Log(level hclog.Level, msg string, args ...any) {
	level = operatorLevel(level, msg, args)
	if !g.enabled(level) {
		return
	}
	args = convertArgs(args)
	if g.name != "" {
		args = append(args, "logger", g.name)
	}
	g.l.Log(context.Background(), toSlog(level), msg, args...)
}

// operatorLevel is the level an operator should see a message at, where
// raft's own is louder than what happened (issue 16: normal operation
// logged WARN and ERROR):
//   - "heartbeat timeout reached" before any leader was ever known is the
//     first election of a starting node, not a lost leader: INFO;
//   - a deposed leader ("peer has newer term") and a peer that does not
//     answer right now (a pause, a restart, a replica that just left) are
//     worth a WARN, not an ERROR: the status page and /readyz say whether
//     the cluster suffers;
//   - a connection the other side closed or reset is DEBUG.
func operatorLevel(level hclog.Level, msg string, args []any) hclog.Level {
	switch {
	case level == hclog.Warn && msg == "heartbeat timeout reached, starting election":
		if v, _ := arg(args, "last-leader-id"); v == "" {
			return hclog.Info
		}
	case level != hclog.Error:
	case msg == "failed to decode incoming command" || msg == "failed to accept connection":
		if v, _ := arg(args, "error"); closedByPeer(v) {
			return hclog.Debug
		}
	case msg == "peer has newer term, stopping replication", strings.HasPrefix(msg, "failed to appendEntries to"),
		strings.HasPrefix(msg, "failed to heartbeat to"), msg == "failed to make requestVote RPC",
		msg == "failed to pipeline appendEntries", msg == "failed to start pipeline":
		return hclog.Warn
	}
	return level
}

// arg returns the value of key in alternating key/value args.
func arg(args []any, key string) (string, bool) {
	for i := 0; i+1 < len(args); i += 2 {
		if k, _ := args[i].(string); k == key {
			return fmt.Sprint(args[i+1]), true
		}
	}
	return "", false
}

func closedByPeer(err string) bool {
	for _, s := range []string{"connection reset by peer", "broken pipe", "EOF", "use of closed network connection"} {
		if strings.Contains(err, s) {
			return true
		}
	}
	return false
}

// convertArgs renders hclog's formatting wrappers (hclog.Fmt, Hex, Octal,
// Binary, Quote) the way hclog would; other values pass unchanged.
func convertArgs(args []any) []any {
	var out []any
	for i, a := range args {
		var s string
		switch v := a.(type) {
		case hclog.Format:
			if len(v) > 0 {
				if f, ok := v[0].(string); ok {
					s = fmt.Sprintf(f, v[1:]...)
					break
				}
			}
			s = fmt.Sprint(v...)
		case hclog.Hex:
			s = "0x" + strconv.FormatUint(uint64(v), 16)
		case hclog.Octal:
			s = "0" + strconv.FormatUint(uint64(v), 8)
		case hclog.Binary:
			s = "0b" + strconv.FormatUint(uint64(v), 2)
		case hclog.Quote:
			s = strconv.Quote(string(v))
		default:
			if out != nil {
				out[i] = a
			}
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		out[i] = s
	}
	if out == nil {
		return args
	}
	return out
}

// Trace logs at LevelTrace.
func (g *Logger) Trace(msg string, args ...any) { g.Log(hclog.Trace, msg, args...) }

// Debug logs at slog.LevelDebug.
func (g *Logger) Debug(msg string, args ...any) { g.Log(hclog.Debug, msg, args...) }

// Info logs at slog.LevelInfo.
func (g *Logger) Info(msg string, args ...any) { g.Log(hclog.Info, msg, args...) }

// Warn logs at slog.LevelWarn.
func (g *Logger) Warn(msg string, args ...any) { g.Log(hclog.Warn, msg, args...) }

// Error logs at slog.LevelError.
func (g *Logger) Error(msg string, args ...any) { g.Log(hclog.Error, msg, args...) }

// IsTrace reports whether Trace records are emitted.
func (g *Logger) IsTrace() bool { return g.enabled(hclog.Trace) }

// IsDebug reports whether Debug records are emitted.
func (g *Logger) IsDebug() bool { return g.enabled(hclog.Debug) }

// IsInfo reports whether Info records are emitted.
func (g *Logger) IsInfo() bool { return g.enabled(hclog.Info) }

// IsWarn reports whether Warn records are emitted.
func (g *Logger) IsWarn() bool { return g.enabled(hclog.Warn) }

// IsError reports whether Error records are emitted.
func (g *Logger) IsError() bool { return g.enabled(hclog.Error) }

// ImpliedArgs returns the args added with With.
func (g *Logger) ImpliedArgs() []any { return g.implied }

// With returns a logger that adds args to every record.
func (g *Logger) With(args ...any) hclog.Logger {
	c := g.clone()
	c.l = g.l.With(args...)
	c.implied = append(append([]any(nil), g.implied...), args...)
	return c
}

// Name returns the logger's name.
func (g *Logger) Name() string { return g.name }

// Named returns a logger whose name is this one's plus "." plus name.
func (g *Logger) Named(name string) hclog.Logger {
	c := g.clone()
	if g.name != "" {
		name = g.name + "." + name
	}
	c.name = name
	return c
}

// ResetNamed returns a logger whose name is name.
func (g *Logger) ResetNamed(name string) hclog.Logger {
	c := g.clone()
	c.name = name
	return c
}

// SetLevel sets the minimum level on top of what the slog handler enables
// (hclog.NoLevel removes it, hclog.Off silences the logger).
func (g *Logger) SetLevel(level hclog.Level) { g.level.Store(int32(level)) }

// GetLevel returns the lowest level that is emitted.
func (g *Logger) GetLevel() hclog.Level {
	for _, lv := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if g.enabled(lv) {
			return lv
		}
	}
	return hclog.Off
}

// StandardLogger returns a *log.Logger writing to this logger at Info (or
// opts.ForceLevel when set).
func (g *Logger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	level := slog.LevelInfo
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = toSlog(opts.ForceLevel)
	}
	l := g.l
	if g.name != "" {
		l = l.With("logger", g.name)
	}
	return slog.NewLogLogger(l.Handler(), level)
}

// StandardWriter returns an io.Writer whose lines become log records.
func (g *Logger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return g.StandardLogger(opts).Writer()
}

func (g *Logger) clone() *Logger {
	c := *g
	c.level = new(atomic.Int32)
	c.level.Store(g.level.Load())
	return &c
}
