//go:build unix

package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// narrator prints the story: "[ 12.3s] text", timestamps relative to the
// start, ANSI colour only when writing to a terminal.
type narrator struct {
	mu     sync.Mutex
	w      io.Writer
	start  time.Time
	color  bool
	tokens tokenNames
}

const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

// isTerminal reports whether w is a character device (a terminal) and the
// user did not ask for no colour (NO_COLOR).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (n *narrator) paint(code, s string) string {
	if !n.color || code == "" {
		return s
	}
	return code + s + ansiReset
}

func (n *narrator) since() time.Duration { return time.Since(n.start) }

func (n *narrator) line(code, format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ts := fmt.Sprintf("[%5.1fs]", n.since().Seconds())
	fmt.Fprintf(n.w, "%s %s\n", n.paint(ansiDim, ts), n.paint(code, fmt.Sprintf(format, args...)))
}

// step prints a step heading.
func (n *narrator) step(num int, title string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.w, "\n%s\n", n.paint(ansiBold+ansiCyan, fmt.Sprintf("── %d. %s %s", num, title, strings.Repeat("─", max(3, 66-len(title))))))
}

func (n *narrator) say(format string, args ...any)  { n.line("", format, args...) }
func (n *narrator) good(format string, args ...any) { n.line(ansiGreen, format, args...) }
func (n *narrator) bad(format string, args ...any)  { n.line(ansiRed+ansiBold, format, args...) }
func (n *narrator) warn(format string, args ...any) { n.line(ansiYellow, format, args...) }
func (n *narrator) note(format string, args ...any) { n.line(ansiDim, format, args...) }

// plain prints lines without a timestamp (tables).
func (n *narrator) plain(code, s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if l == "" {
			fmt.Fprintln(n.w)
			continue
		}
		fmt.Fprintf(n.w, "         %s\n", n.paint(code, l))
	}
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// tokenNames shows fencing tokens readably. A token is a 16-digit number
// (the cluster floors its counter at the wall clock in microseconds, so
// that tokens keep rising across rebuilt clusters); the demo names the
// first one it shows T and every other one by its distance from it:
// T+38, T-2.
type tokenNames struct {
	mu   sync.Mutex
	base uint64 // 0: none shown yet
}

// name returns how token t is shown, and whether it is the first (T).
func (tn *tokenNames) name(t uint64) (string, bool) {
	if t == 0 {
		return "0 (none)", false
	}
	tn.mu.Lock()
	defer tn.mu.Unlock()
	first := tn.base == 0
	if first {
		tn.base = t
	}
	switch {
	case t == tn.base:
		return "T", first
	case t > tn.base:
		return fmt.Sprintf("T+%d", t-tn.base), false
	}
	return fmt.Sprintf("T-%d", tn.base-t), false
}

// tok shows token t; the first one shown is also printed in full, with
// what T means.
func (n *narrator) tok(t uint64) string {
	s, first := n.tokens.name(t)
	if first {
		return fmt.Sprintf("T = %d (tokens are 16-digit numbers; the others are shown as T+n: a new leader raises the counter to its clock in µs, hence the jumps)", t)
	}
	return s
}

// longNumber is a number as long as a token.
var longNumber = regexp.MustCompile(`\b\d{13,20}\b`)

// toks shows the tokens in text (a document's content) as tok does.
func (n *narrator) toks(text string) string {
	return longNumber.ReplaceAllStringFunc(text, func(m string) string {
		t, err := strconv.ParseUint(m, 10, 64)
		if err != nil {
			return m
		}
		return n.tok(t)
	})
}
