package workload

import (
	"context"
	"fmt"

	"github.com/raftlock/raftlock/bench/internal/cluster"
	"github.com/raftlock/raftlock/bench/internal/report"
)

// Memory is workload 6, on a fresh cluster: sessions spread over every
// replica acquire MemoryLocks locks and keep them; it reports each replica
// process's RSS (after a GC and a return of free memory to the OS, in every
// process alike), against the idle cluster's RSS measured the same way
// before. Session and lease objects of the embedded client side count too.
func Memory(ctx context.Context, cl *cluster.Cluster, p Params) (Result, error) {
	idle, _, err := memory(ctx, cl)
	if err != nil {
		return Result{}, err
	}
	held, errs, rate, err := fill(ctx, cl, p, "mem", p.MemorySessions, p.MemoryLocks)
	if err != nil {
		return Result{}, err
	}
	rss, heap, err := memory(ctx, cl)
	if err != nil {
		return Result{}, err
	}
	var maxRSS float64
	for _, v := range rss {
		maxRSS = max(maxRSS, v)
	}
	d := memoryDefs(p)
	res := Result{Samples: []report.Sample{
		{Def: d.rssMean, Value: mean(rss) / mib},
		{Def: d.rssMax, Value: maxRSS / mib},
		{Def: d.heap, Value: mean(heap) / mib},
		{Def: d.idle, Value: mean(idle) / mib},
		{Def: d.perLock, Value: (mean(rss) - mean(idle)) / float64(max(held, 1))},
		{Def: d.acquire, Value: rate},
		{Def: d.held, Value: float64(held)},
		{Def: d.errs, Value: float64(errs.Count)},
	}, Notes: errorsNote(errs)}
	if held < p.MemoryLocks {
		res.Notes = append(res.Notes, fmt.Sprintf("only %d of %d locks held", held, p.MemoryLocks))
	}
	return res, nil
}

// memory collects garbage in every replica process, then returns their RSS
// and Go heap in bytes.
func memory(ctx context.Context, cl *cluster.Cluster) (rss, heap []float64, err error) {
	for _, n := range cl.Nodes {
		m, err := n.Agent.Mem(ctx)
		if err != nil {
			return nil, nil, err
		}
		u, err := n.Usage()
		if err != nil {
			return nil, nil, err
		}
		rss = append(rss, float64(u.RSSBytes))
		heap = append(heap, float64(m.HeapInuse))
	}
	return rss, heap, nil
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(max(len(xs), 1))
}
