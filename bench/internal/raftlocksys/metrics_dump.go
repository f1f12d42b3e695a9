package raftlocksys

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// EnvMetrics names a directory: when set in the benchmark's environment
// (replica processes inherit it), every raftlock replica registers its
// node's Prometheus metrics and writes them there once a second, in the
// text format, as metrics-<system>-r<index>-<unix seconds>.txt (group-commit
// batch sizes, forwards, commit latency since the replica started; replica
// processes are killed, so there is no last write at exit), and the Go
// runtime's CPU estimates by class (/cpu/classes/...: user code, GC,
// scavenger, idle; the runtime updates them at each GC cycle) and GC
// cycles. The difference
// of two files is what happened between them. Diagnostic only: a file that
// cannot be written is reported on stderr.
const EnvMetrics = "RAFTLOCK_BENCH_METRICS"

// metricsDump is a replica's registry and where to write it; nil when
// EnvMetrics is unset.
type metricsDump struct {
	reg  *prometheus.Registry
	path string // without the time and extension
	stop chan struct{}
}

func newMetricsDump(system string, index int) *metricsDump {
	dir := os.Getenv(EnvMetrics)
	if dir == "" {
		return nil
	}
	d := &metricsDump{reg: prometheus.NewRegistry(), path: filepath.Join(dir, fmt.Sprintf("metrics-%s-r%d", system, index)), stop: make(chan struct{})}
	d.reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/(cpu/classes|gc/cycles)/`)})))
	go d.loop()
	return d
}

// loop writes the metrics once a second until close.
func (d *metricsDump) loop() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case now := <-t.C:
			if err := d.write(now); err != nil {
				fmt.Fprintf(os.Stderr, "raftlocksys: metrics dump: %v\n", err)
			}
		}
	}
}

// close ends the loop (nil-safe).
func (d *metricsDump) close() {
	if d != nil {
		close(d.stop)
	}
}

func (d *metricsDump) write(now time.Time) error {
	return prometheus.WriteToTextfile(fmt.Sprintf("%s-%d.txt", d.path, now.Unix()), d.reg)
}
