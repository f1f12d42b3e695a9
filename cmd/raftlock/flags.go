package main

import (
	"errors"
	"strconv"
	"time"
)

// durationFlag is a duration flag that remembers what was typed, so that a
// message about it speaks the user's units ("-ttl 90s", not "1m30s").
type durationFlag struct {
	d    time.Duration
	text string // as typed; "" for the default
}

func (f *durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration such as 10s, 1m30s or 500ms")
	}
	f.d, f.text = d, s
	return nil
}

func (f *durationFlag) String() string { return short(f.d) }

// typed is the value as the user typed it (or the default, shortened).
func (f *durationFlag) typed() string {
	if f.text != "" {
		return f.text
	}
	return short(f.d)
}

// short formats a duration without trailing zero units: 10s, 24h, 1m30s,
// 2.33s (to 10 ms above a second).
func short(d time.Duration) string {
	if d >= time.Second || d <= -time.Second {
		d = d.Truncate(10 * time.Millisecond)
	}
	s := d.String()
	for _, zero := range []string{"0s", "0m"} {
		if len(s) > len(zero)+1 && s[len(s)-len(zero):] == zero && (s[len(s)-len(zero)-1] == 'm' || s[len(s)-len(zero)-1] == 'h') {
			s = s[:len(s)-len(zero)]
		}
	}
	return s
}

// countFlag is a non-negative integer flag with a message that says what
// the number is.
type countFlag struct {
	n    uint64
	what string // "a fencing token (raftlock locks shows them)"
}

func (f *countFlag) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return errors.New("want " + f.what)
	}
	f.n = n
	return nil
}

func (f *countFlag) String() string { return strconv.FormatUint(f.n, 10) }
