package report

import (
	"math"
	"strings"
	"testing"
)

func TestFormatNumber(t *testing.T) {
	for _, c := range []struct {
		v      float64
		digits int
		want   string
	}{
		{0, 0, "0"}, {999, 0, "999"}, {1000, 0, "1,000"}, {1234567.891, 2, "1,234,567.89"},
		{-12345, 1, "-12,345.0"}, {0.123, 2, "0.12"}, {-0.2, 0, "0"}, {-0.001, 2, "0.00"},
	} {
		if got := FormatNumber(c.v, c.digits); got != c.want {
			t.Errorf("FormatNumber(%v, %d) = %q, want %q", c.v, c.digits, got, c.want)
		}
	}
}

func TestTable(t *testing.T) {
	ops := Def{Key: "u.ops", Workload: "1. uncontended", Name: "Lock+Unlock/s", Higher: true}
	p99 := Def{Key: "u.p99", Workload: "1. uncontended", Name: "p99", Unit: "ms", Digits: 2}
	hidden := Def{Key: "u.err", Workload: "1. uncontended", Name: "errors", Hidden: true}
	only := Def{Key: "m.rss", Workload: "6. memory", Name: "RSS", Unit: "MiB", Digits: 1}
	var c Collector
	c.Add("etcd", []Sample{{ops, 1000}, {p99, 4}, {hidden, 3}, {only, 50}})
	c.Add("etcd", []Sample{{ops, 3000}, {p99, 6}})
	c.Add("etcd", []Sample{{ops, 2000}, {p99, 5}})
	c.Add("raftlock", []Sample{{ops, 4000}, {p99, 2.5}})

	var b strings.Builder
	if err := WriteTable(&b, c.Metrics()); err != nil {
		t.Fatal(err)
	}
	want := `| workload | metric | etcd | raftlock | raftlock/etcd |
|---|---|--:|--:|--:|
| 1. uncontended | Lock+Unlock/s | 2,000 (n=3) | 4,000 | 2.00× ✓ |
|  | p99 (ms) | 5.00 (n=3) | 2.50 | 0.50× ✓ |
| 6. memory | RSS (MiB) | 50.0 | n/a | n/a |
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestMetricsJSONRatio(t *testing.T) {
	d := Def{Key: "k", Higher: true}
	var c Collector
	c.Add("etcd", []Sample{{d, 2}})
	js := MetricsJSON(c.Metrics())
	if js[0].Ratio != nil {
		t.Error("ratio without raftlock runs")
	}
	c.Add("raftlock", []Sample{{d, 3}})
	js = MetricsJSON(c.Metrics())
	if js[0].Ratio == nil || *js[0].Ratio != 1.5 || js[0].Median["etcd"] != 2 {
		t.Errorf("got %+v", js[0])
	}
}

func TestTableWAL(t *testing.T) {
	ops := Def{Key: "u.ops", Workload: "1. uncontended", Name: "Lock+Unlock/s", Higher: true}
	var c Collector
	c.Add("etcd", []Sample{{ops, 1000}})
	c.Add("raftlock-wal", []Sample{{ops, 3000}})
	c.Add("raftlock", []Sample{{ops, 500}})
	var b strings.Builder
	if err := WriteTable(&b, c.Metrics()); err != nil {
		t.Fatal(err)
	}
	want := `| workload | metric | etcd | raftlock | raftlock-wal | raftlock/etcd | raftlock-wal/etcd |
|---|---|--:|--:|--:|--:|--:|
| 1. uncontended | Lock+Unlock/s | 1,000 | 500 | 3,000 | 0.50× | 3.00× ✓ |
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestGrowthExponent(t *testing.T) {
	for _, c := range []struct {
		xs, ys []float64
		want   float64
		ok     bool
	}{
		{[]float64{1e4, 1e5, 1e6}, []float64{2, 20, 200}, 1, true},
		{[]float64{1e4, 1e5, 1e6}, []float64{1, 100, 10000}, 2, true},
		{[]float64{1e4, 1e5, 1e6}, []float64{5, 5, 5}, 0, true},
		{[]float64{1e4, 1e5}, []float64{3, 0}, 0, false}, // one usable point
		{[]float64{1e4, 1e4}, []float64{3, 4}, 0, false}, // one x
	} {
		got, ok := GrowthExponent(c.xs, c.ys)
		if ok != c.ok || (ok && math.Abs(got-c.want) > 1e-9) {
			t.Errorf("GrowthExponent(%v, %v) = %v, %v; want %v, %v", c.xs, c.ys, got, ok, c.want, c.ok)
		}
	}
}

func TestWriteGrowth(t *testing.T) {
	var c Collector
	a := Def{Key: "s.10k.rss", Name: "RSS"}
	b := Def{Key: "s.100k.rss", Name: "RSS"}
	c.Add("raftlock", []Sample{{a, 10}, {b, 100}})
	c.Add("etcd", []Sample{{a, 30}})
	var out strings.Builder
	WriteGrowth(&out, c.Metrics(), []string{"100 / 10k", "1k / 100k"}, []float64{1e4, 1e5},
		[]GrowthSeries{{Name: "RSS", Unit: "MiB", Keys: []string{"s.10k.rss", "s.100k.rss"}}})
	want := `etcd:

| sessions / locks | RSS (MiB) |
|---|--:|
| 100 / 10k | 30 |
| growth exponent | n/a |

raftlock:

| sessions / locks | RSS (MiB) |
|---|--:|
| 100 / 10k | 10 |
| 1k / 100k | 100 |
| growth exponent | 1.00 |

`
	if got := out.String(); got != want {
		t.Errorf("growth:\n%s\nwant:\n%s", got, want)
	}
}

// BestBatched keeps, per worker count of one store, the fastest of the
// ideal group commit's measurements, in the order the counts came.
func TestBestBatched(t *testing.T) {
	ls := []BatchedLimit{
		{Store: "bolt", Workers: 16, Depth: 1, CommandsPerSec: 100},
		{Store: "bolt", Workers: 16, Depth: 1, Gather: true, CommandsPerSec: 300},
		{Store: "wal", Workers: 16, Depth: 1, CommandsPerSec: 900},
		{Store: "bolt", Workers: 16, Depth: 2, CommandsPerSec: 200},
		{Store: "bolt", Workers: 64, Depth: 1, CommandsPerSec: 500},
		{Store: "bolt", Workers: 64, Depth: 2, Gather: true, CommandsPerSec: 700},
		{Store: "bolt", Workers: 64, Depth: 2, Gather: true, Woken: true, CommandsPerSec: 800},
	}
	got := BestBatched(ls, "bolt")
	if len(got) != 2 || got[0] != ls[1] || got[1] != ls[6] {
		t.Fatalf("bolt: %+v", got)
	}
	if got := BestBatched(ls, "wal"); len(got) != 1 || got[0] != ls[2] {
		t.Fatalf("wal: %+v", got)
	}
	if got := BestBatched(ls, "none"); got != nil {
		t.Fatalf("none: %+v", got)
	}
	var b strings.Builder
	WriteLimits(&b, &Limits{BareRaft: []RaftLimit{{Store: "bolt", Appliers: 1, CommitsPerSec: 10}}, Batched: ls})
	if !strings.Contains(b.String(), "| 16 | 300 | 150 | 1 | polled |") || !strings.Contains(b.String(), "| 64 | 800 | 400 | 2 | woken |") {
		t.Errorf("limits text lacks the best 64-worker row:\n%s", b.String())
	}
}

func TestFloorShares(t *testing.T) {
	ops := Def{Key: "u.ops", Workload: "1. uncontended", Name: "Lock+Unlock/s", Higher: true}
	p99 := Def{Key: "u.p99", Workload: "1. uncontended", Name: "p99", Unit: "ms"}
	ho := Def{Key: "c.ho", Workload: "3. contended", Name: "handoffs/s", Higher: true}
	var c Collector
	c.Add("etcd", []Sample{{ops, 100}, {p99, 4}, {ho, 10}})
	var b strings.Builder
	if err := WriteFloorShares(&b, c.Metrics()); err != nil || b.Len() != 0 {
		t.Fatalf("no floor ran: wrote %q, %v", b.String(), err)
	}
	c.Add("raftlock", []Sample{{ops, 300}, {p99, 2}, {ho, 50}})
	c.Add("raft-floor", []Sample{{ops, 400}, {p99, 1}})
	c.Add("raftlock-wal", []Sample{{ops, 600}, {ho, 90}})
	if err := WriteFloorShares(&b, c.Metrics()); err != nil {
		t.Fatal(err)
	}
	// Only pairs that both ran; hand-offs have no floor. A rate is a share
	// of the floor's, a cost a multiple of it.
	want := `| workload | metric | raftlock of raft-floor |
|---|---|--:|
| 1. uncontended | Lock+Unlock/s | 75 % |
| 1. uncontended | p99 | 2.00× |
`
	if got := b.String(); got != want {
		t.Errorf("floor shares:\n%s\nwant:\n%s", got, want)
	}
}
