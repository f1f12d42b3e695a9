// Package procstat reads a process's CPU time, resident memory and
// voluntary context switches from /proc.
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
	// Sleeps is the number of voluntary context switches of its live
	// threads so far: how often one of them blocked and was woken again
	// (a count, so unlike CPU time it does not depend on how fast the
	// machine is at the moment). Threads that exited are not counted; a Go
	// process keeps its threads.
	Sleeps int64
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
	sleeps, err := readSleeps(pid)
	if err != nil {
		return Usage{}, fmt.Errorf("procstat: pid %d: %w", pid, err)
	}
	return Usage{CPU: cpu, RSSBytes: rss, Sleeps: sleeps}, nil
}

// readSleeps sums voluntary_ctxt_switches over the threads of pid
// (/proc/<pid>/status has the main thread's only). A thread that exits
// while the directory is read is skipped.
func readSleeps(pid int) (int64, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, t := range tasks {
		status, err := os.ReadFile(dir + "/" + t.Name() + "/status")
		if err != nil {
			continue // exited meanwhile
		}
		n, err := ParseSleeps(status)
		if err != nil {
			return 0, fmt.Errorf("task %s: %w", t.Name(), err)
		}
		sum += n
	}
	return sum, nil
}

// ParseSleeps returns voluntary_ctxt_switches from the contents of
// /proc/<pid>/task/<tid>/status.
func ParseSleeps(status []byte) (int64, error) {
	rest, ok := statusField(status, "voluntary_ctxt_switches:")
	if !ok {
		return 0, fmt.Errorf("no voluntary_ctxt_switches line")
	}
	n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("voluntary_ctxt_switches: %w", err)
	}
	return n, nil
}

// statusField returns the rest of the first line of a /proc status file
// that starts with name (with its colon).
func statusField(status []byte, name string) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name); ok {
			return rest, true
		}
	}
	return "", false
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
	rest, ok := statusField(status, "VmRSS:")
	if !ok {
		return 0, fmt.Errorf("no VmRSS line (a zombie or kernel thread?)")
	}
	f := strings.Fields(rest)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("malformed VmRSS line %q", "VmRSS:"+rest)
	}
	kb, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("VmRSS: %w", err)
	}
	return kb * 1024, nil
}
