//go:build unix

package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// narrator prints the story: "[ 12.3s] text", timestamps relative to the
// start, ANSI colour only when writing to a terminal.
type narrator struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	color bool
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
