// Package procstat reads a process's CPU time and resident memory from /proc.
package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. It
// is 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// Usage is a process's resource use at one instant.
type Usage struct {
	CPU      time.Duration // user + system time of all its threads so far
	RSSBytes int64         // resident set size
}

// Read returns the usage of process pid.
func Read(pid int) (Usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, err
	}
	cpu, err := ParseCPU(stat)
	if err != nil {
		return Usage{}, fmt.Errorf("procstat: pid %d: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Usage{}, err
	}
	rss, err := ParseRSS(status)
	if err != nil {
		return Usage{}, fmt.Errorf("procstat: pid %d: %w", pid, err)
	}
	return Usage{CPU: cpu, RSSBytes: rss}, nil
}

// ParseCPU returns utime+stime from the contents of /proc/<pid>/stat.
func ParseCPU(stat []byte) (time.Duration, error) {
	// The command name (field 2) is in parentheses and may hold spaces or
	// parentheses itself: fields are counted after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("stat has %d fields after the name", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat cpu field %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// ParseRSS returns VmRSS in bytes from the contents of /proc/<pid>/status.
func ParseRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("malformed VmRSS line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS: %w", err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmRSS line (a zombie or kernel thread?)")
}
