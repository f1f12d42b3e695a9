package proc

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	_ "modernc.org/sqlite"
)

// ---- nemesis ----

func (x *Harness) leader(ctx context.Context) (int, bool) {
	for i, r := range x.reps {
		if x.down[i].Load() || x.pausedCh(i) != nil || !r.running() {
			continue
		}
		if st, err := x.status(ctx, i); err == nil && st.State == "leader" {
			return i, true
		}
	}
	return 0, false
}

func (x *Harness) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// nemesis injects faults until the end of the workload, as the run's class
// says; every fault is bounded in time and undone before the next.
func (x *Harness) nemesis(ctx context.Context) {
	switch x.o.Class {
	case "network":
		x.loop(ctx, x.networkStep)
	case "disk":
		x.loop(ctx, x.diskStep)
	case "restart":
		x.loop(ctx, x.restartStep)
	case "upgrade":
		x.upgradeNemesis(ctx)
	case "stranger":
		x.loop(ctx, x.strangerStep)
	default:
		x.loop(ctx, func(ctx context.Context) { x.mixedStep(ctx, x.rng.IntN(100)) })
	}
}

// loop runs step after step, with a gap of half a TTL to 1.5 TTLs before
// each, until the end of the workload.
func (x *Harness) loop(ctx context.Context, step func(ctx context.Context)) {
	ttl := x.o.TTL
	for ctx.Err() == nil {
		gap := ttl/2 + time.Duration(x.rng.Int64N(int64(ttl)))
		if !time.Now().Add(gap).Before(x.end) {
			x.sleep(ctx, time.Until(x.end))
			return
		}
		x.sleep(ctx, gap)
		step(ctx)
	}
}

// mixedStep injects one fault of the mixed class (k in [0, 100) picks it):
// SIGSTOP past the TTL, SIGKILL and SIGTERM with restarts, partitions,
// leader isolation, one-way cuts, quorum loss.
func (x *Harness) mixedStep(ctx context.Context, k int) {
	ttl := x.o.TTL
	r := x.rng
	n := x.o.Replicas
	hold := ttl/2 + time.Duration(r.Int64N(int64(2*ttl)))
	if !x.net.CanPartition() && k >= 60 {
		k = r.IntN(60) // process faults only
	}
	switch {
	case k < 35:
		// A pause longer than the TTL, preferably of a replica whose
		// client holds a lease and has not written yet.
		i := r.IntN(n)
		for c := range x.holding {
			if h := x.holding[c].Load(); h >= 0 {
				i = int(h)
				break
			}
		}
		if x.down[i].Load() {
			return
		}
		done := x.fault("sigstop", x.reps[i].id)
		d := ttl + ttl/2 + time.Duration(r.Int64N(int64(ttl)))
		ch := make(chan struct{})
		x.pmu.Lock()
		x.paused[i] = ch
		x.pmu.Unlock()
		if err := x.reps[i].pause(); err != nil {
			x.logf("pause r%d: %v", i+1, err)
		}
		x.sleep(ctx, d)
		x.reps[i].resume()
		x.pmu.Lock()
		x.paused[i] = nil
		x.pmu.Unlock()
		close(ch)
		done()
	case k < 50:
		i := r.IntN(n)
		if l, ok := x.leader(ctx); ok && r.IntN(2) == 0 {
			i = l
		}
		done := x.fault("sigkill-restart", x.reps[i].id)
		x.down[i].Store(true)
		x.reps[i].stop(syscall.SIGKILL, 5*time.Second)
		x.sleep(ctx, hold)
		x.restart(i)
		done()
	case k < 60:
		i := r.IntN(n)
		done := x.fault("sigterm-restart", x.reps[i].id)
		x.down[i].Store(true)
		x.noteTerm(i)
		x.reps[i].stop(syscall.SIGTERM, 10*time.Second)
		x.sleep(ctx, hold/2)
		x.restart(i)
		done()
	case k < 75:
		perm := r.Perm(n)
		cut := 1 + r.IntN(n/2)
		for _, a := range perm[:cut] {
			for _, b := range perm[cut:] {
				x.block(a, b)
				x.block(b, a)
			}
		}
		done := x.faultCut("partition", fmt.Sprintf("%v | %v", x.ids(perm[:cut]), x.ids(perm[cut:])), perm[:cut]) // from the cut on
		x.sleep(ctx, hold)
		x.heal()
		done()
	case k < 85:
		l, ok := x.leader(ctx)
		var cut []int // the isolated leader is cut off from every quorum
		if ok {
			for b := range n {
				if b != l {
					x.block(l, b)
					x.block(b, l)
				}
			}
			cut = []int{l}
		}
		done := x.faultCut("isolate-leader", x.ids([]int{l}), cut) // from the cut on
		x.sleep(ctx, hold)
		x.heal()
		done()
	case k < 93:
		a := r.IntN(n)
		b := (a + 1 + r.IntN(n-1)) % n
		done := x.fault("one-way", fmt.Sprintf("%s→%s", x.reps[a].id, x.reps[b].id))
		x.block(a, b)
		if l, ok := x.leader(ctx); ok && l != a && r.IntN(2) == 0 {
			x.block(l, a)
		}
		x.sleep(ctx, hold)
		x.heal()
		done()
	default:
		done := x.fault("quorum-loss", "all")
		for a := range n {
			for b := range n {
				if a != b {
					x.block(a, b)
				}
			}
		}
		x.sleep(ctx, ttl+time.Duration(r.Int64N(int64(ttl))))
		x.heal()
		done()
	}
}

func (x *Harness) ids(is []int) string {
	var out []string
	for _, i := range is {
		out = append(out, x.reps[i].id)
	}
	return strings.Join(out, ",")
}

func (x *Harness) block(a, b int) {
	if err := x.net.Block(a, b); err != nil {
		x.logf("block r%d→r%d: %v", a+1, b+1, err)
	}
}

func (x *Harness) heal() {
	if err := x.net.Heal(); err != nil {
		x.logf("heal: %v", err)
	}
}

func (x *Harness) restart(i int) {
	if err := x.reps[i].start(); err != nil {
		x.logf("restart r%d: %v", i+1, err)
		x.mu.Lock()
		x.h.HarnessErrors = append(x.h.HarnessErrors, fmt.Sprintf("restart r%d: %v", i+1, err))
		x.mu.Unlock()
		return
	}
	x.down[i].Store(false)
}

// healAll undoes every fault: rules flushed, paused replicas continued,
// stopped ones restarted.
func (x *Harness) healAll() {
	x.heal()
	for i, r := range x.reps {
		if r.running() {
			r.resume()
		} else {
			x.restart(i)
		}
	}
}
