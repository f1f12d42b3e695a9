package stats

import (
	"math"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	s := make([]float64, 100)
	for i := range s {
		s[i] = float64(i + 1)
	}
	for _, c := range []struct{ p, want float64 }{{50, 50}, {99, 99}, {100, 100}, {0.1, 1}, {1, 1}} {
		if got := Percentile(s, c.p); got != c.want {
			t.Errorf("Percentile(1..100, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := Percentile([]float64{7}, 99); got != 7 {
		t.Errorf("single sample: got %v", got)
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("empty: want NaN")
	}
}

func TestMedian(t *testing.T) {
	in := []float64{3, 1, 2}
	if got := Median(in); got != 2 {
		t.Errorf("odd: got %v", got)
	}
	if in[0] != 3 {
		t.Error("Median modified its input")
	}
	if got := Median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("even: got %v", got)
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("empty: want NaN")
	}
}

func TestSummarize(t *testing.T) {
	var ns []int64
	for i := 1; i <= 1000; i++ {
		ns = append(ns, int64(i)*int64(time.Microsecond))
	}
	l := Summarize(ns)
	if l.N != 1000 || l.P50 != 0.5 || l.P99 != 0.99 || l.Max != 1 {
		t.Errorf("got %+v", l)
	}
	if math.Abs(l.Mean-0.5005) > 1e-9 {
		t.Errorf("mean %v", l.Mean)
	}
	if e := Summarize(nil); e != (Latency{}) {
		t.Errorf("empty: %+v", e)
	}
}
