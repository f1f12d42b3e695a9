package report

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// Machine describes where the benchmark ran.
type Machine struct {
	CPUModel  string `json:"cpu_model"`
	Cores     int    `json:"cores"`
	MemTotal  string `json:"mem_total"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"`
	OSArch    string `json:"os_arch"`
	// LoadAvg is /proc/loadavg at the start: other work on the machine
	// makes the figures noisy.
	LoadAvg string `json:"loadavg_at_start"`
}

// DescribeMachine reads the machine's description from /proc.
func DescribeMachine() Machine {
	return Machine{
		CPUModel:  procField("/proc/cpuinfo", "model name"),
		Cores:     runtime.NumCPU(),
		MemTotal:  memTotal(),
		Kernel:    readTrim("/proc/sys/kernel/osrelease"),
		GoVersion: runtime.Version(),
		OSArch:    runtime.GOOS + "/" + runtime.GOARCH,
		LoadAvg:   LoadAvg(),
	}
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// LoadAvg returns the 1, 5 and 15 minute load averages.
func LoadAvg() string {
	f := strings.Fields(readTrim("/proc/loadavg"))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// memTotal returns the machine's memory in GiB, e.g. "23.5 GiB".
func memTotal() string {
	var kb int64
	if _, err := fmt.Sscanf(procField("/proc/meminfo", "MemTotal"), "%d kB", &kb); err != nil {
		return ""
	}
	return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
}
