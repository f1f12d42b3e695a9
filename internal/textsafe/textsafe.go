// Package textsafe keeps text that came from outside — lock names, session
// descriptions, revocation reasons, principal names, error details that
// quote them — from acting on the terminal that shows it, and finds the
// control characters that the API layers refuse in new lock names. It
// imports nothing of raftlock.
//
// A terminal acts on control characters: ESC starts the sequences that
// clear lines, recolour text, set the window title or (OSC 52) write the
// clipboard; CR and BS overwrite what was shown; C1 characters (U+0080 to
// U+009F) act like ESC sequences on some terminals. Bidirectional
// formatting characters (U+202A to U+202E, U+2066 to U+2069, U+200E,
// U+200F, U+061C) reorder what is shown, so that a name reads as another.
package textsafe

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Control returns the first control character of s (Unicode category Cc:
// U+0000 to U+001F, U+007F to U+009F) and its byte offset; ok is false if
// s has none. Invalid UTF-8 is not reported here.
func Control(s string) (r rune, at int, ok bool) {
	for i, c := range s {
		if unicode.Is(unicode.Cc, c) {
			return c, i, true
		}
	}
	return 0, 0, false
}

// hazard reports whether a terminal acts on r or shows it misleadingly:
// a control or bidirectional formatting character.
func hazard(r rune) bool {
	switch {
	case unicode.Is(unicode.Cc, r):
		return true
	case r == 0x061C, r == 0x200E, r == 0x200F, r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// jsonHazard is hazard but for C0: JSON's whitespace (escaped by
// encoding/json inside strings).
func jsonHazard(r rune) bool { return r >= 0x20 && hazard(r) }

// Display returns s as a terminal may show it: s itself when it holds no
// control or bidirectional formatting character and no invalid UTF-8, and
// does not start with a double quote; otherwise s as a Go string literal
// (strconv.Quote: those characters escaped, \x1b, \u202e, and the whole in
// double quotes). So what is shown never acts on the terminal, and tells
// apart two strings that differ (strconv.Unquote gives a quoted one back).
func Display(s string) string {
	if needsQuoting(s) {
		return strconv.Quote(s)
	}
	return s
}

func needsQuoting(s string) bool {
	if len(s) > 0 && s[0] == '"' || !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if hazard(r) {
			return true
		}
	}
	return false
}

// EscapeJSON returns JSON text b (as encoding/json writes it: valid UTF-8,
// C0 controls inside strings already escaped) with the characters
// encoding/json leaves raw and a terminal acts on — DEL, C1 controls,
// bidirectional formatting characters — written as \u escapes. Such
// characters occur only inside JSON strings (the whitespace between
// tokens is C0, left alone), so the result decodes to the same value.
func EscapeJSON(b []byte) []byte {
	if !bytes.ContainsFunc(b, jsonHazard) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if jsonHazard(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}
