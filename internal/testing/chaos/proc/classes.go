package proc

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// Multi-process fault classes (Options.Class): mixed (the nemesis of
// nemesis.go), network (latency, jitter, loss and cuts through the relays),
// disk (a replica's size-limited data dir fills up), restart (rolling
// restarts, stop-all/start-all, a quorum subset), upgrade (upgrade.go),
// stranger (stranger.go).

// Classes lists the multi-process classes.
var Classes = []string{"mixed", "network", "disk", "restart", "upgrade", "stranger"}

// probeBound is how long a probe may take where the class expects the
// cluster to serve.
const probeBound = 20 * time.Second

// setLinks sets the faults of every link between replicas a and b (both
// directions), or of every link of a when b < 0.
func (x *Harness) setLinks(a, b int, f linkFaults) {
	for j := range x.o.Replicas {
		if j == a || (b >= 0 && j != b) {
			continue
		}
		// bytes a → j pass j's relay (source a); bytes j → a pass a's relay.
		x.relays[j].set(x.net.Source(tcpAddr(x.net.Host(a))), f, f)
		x.relays[a].set(x.net.Source(tcpAddr(x.net.Host(j))), f, f)
	}
}

// networkStep injects one fault through the relays, holds it and clears
// it: latency and jitter everywhere, loss on one replica's links, one slow
// direction, a cut link, the leader cut off; sometimes a pause instead.
func (x *Harness) networkStep(ctx context.Context) {
	r := x.rng
	n := x.o.Replicas
	ttl := x.o.TTL
	hold := ttl/2 + time.Duration(r.Int64N(int64(3*ttl)))
	clear := func() {
		for _, rl := range x.relays {
			rl.clear()
		}
	}
	switch k := r.IntN(100); {
	case k < 25:
		f := linkFaults{Latency: time.Duration(5+r.IntN(60)) * time.Millisecond, Jitter: time.Duration(r.IntN(40)) * time.Millisecond}
		done := x.fault("latency-jitter", fmt.Sprintf("all links %v±%v", f.Latency, f.Jitter))
		for _, rl := range x.relays {
			rl.set("", f, f)
		}
		x.sleep(ctx, hold)
		clear()
		done()
	case k < 45:
		a := r.IntN(n)
		f := linkFaults{Latency: 2 * time.Millisecond, Jitter: 10 * time.Millisecond, Loss: 0.01 + 0.09*r.Float64()}
		done := x.fault("loss", fmt.Sprintf("%s's links, %.0f%%", x.reps[a].id, 100*f.Loss))
		x.setLinks(a, -1, f)
		x.sleep(ctx, hold)
		clear()
		done()
	case k < 60:
		a := r.IntN(n)
		b := (a + 1 + r.IntN(n-1)) % n
		d := time.Duration(100+r.IntN(300)) * time.Millisecond
		done := x.fault("slow-direction", fmt.Sprintf("%s→%s %v", x.reps[a].id, x.reps[b].id, d))
		x.relays[b].set(x.net.Source(tcpAddr(x.net.Host(a))), linkFaults{Latency: d}, linkFaults{})
		x.sleep(ctx, hold)
		clear()
		done()
	case k < 75:
		a := r.IntN(n)
		b := (a + 1 + r.IntN(n-1)) % n
		done := x.fault("cut-link", x.reps[a].id+"|"+x.reps[b].id)
		x.setLinks(a, b, linkFaults{Cut: true})
		x.sleep(ctx, hold)
		clear()
		done()
	case k < 88:
		l, ok := x.leader(ctx)
		if !ok {
			return
		}
		done := x.fault("relay-isolate-leader", x.reps[l].id)
		x.setLinks(l, -1, linkFaults{Cut: true})
		x.sleep(ctx, hold)
		clear()
		done()
		x.probeAny(ctx, "after the leader was cut off and the cut healed", x.all(), probeBound)
	default:
		x.mixedStep(ctx, r.IntN(35)) // a pause
	}
}

// diskStep fills one replica's data dir (preferably the leader's) for a
// while: the others must go on serving; then frees it and restarts the
// replica if its process ended.
func (x *Harness) diskStep(ctx context.Context) {
	r := x.rng
	if r.IntN(4) == 0 {
		x.mixedStep(ctx, r.IntN(60))
		return
	}
	i := r.IntN(x.o.Replicas)
	if l, ok := x.leader(ctx); ok && r.IntN(2) == 0 {
		i = l
	}
	if x.down[i].Load() {
		return
	}
	rep := x.reps[i]
	before := countLines(rep.logPath, "no space left on device")
	wrote, err := fillDisk(rep.dataDir)
	done := x.fault("disk-full", fmt.Sprintf("%s (%d bytes of filler)", rep.id, wrote))
	if err != nil {
		x.logf("fill %s: %v", rep.id, err)
	}
	x.sleep(ctx, x.o.TTL)
	var others []int
	for j := range x.o.Replicas {
		if j != i {
			others = append(others, j)
		}
	}
	x.probeAny(ctx, "disk full on "+rep.id+": the others serve", others, probeBound)
	x.sleep(ctx, time.Duration(r.Int64N(int64(2*x.o.TTL))))
	if err := freeDisk(rep.dataDir); err != nil {
		x.logf("free %s: %v", rep.id, err)
	}
	x.mu.Lock()
	x.h.Notes = append(x.h.Notes, fmt.Sprintf("disk full on %s: %d log lines with ENOSPC", rep.id, countLines(rep.logPath, "no space left on device")-before))
	x.mu.Unlock()
	if rep.exited() {
		x.noteDiskExit(i)
		x.reps[i].stop(syscall.SIGKILL, time.Second)
		x.restart(i)
	}
	done()
}

// restartStep: a rolling restart (SIGTERM or SIGKILL), or every replica
// stopped and started again in random orders, or only a quorum of them
// started first. After each, a quorum of the configured replicas runs, so
// the cluster must serve (probes).
func (x *Harness) restartStep(ctx context.Context) {
	r := x.rng
	n := x.o.Replicas
	sig := syscall.SIGTERM
	if r.IntN(2) == 0 {
		sig = syscall.SIGKILL
	}
	switch k := r.IntN(100); {
	case k < 25:
		// The review's deploy: SIGTERM every replica in turn, then start
		// a quorum of them that leaves out the last one stopped.
		stops := r.Perm(n)
		first := r.Perm(n - 1)[:n/2+1]
		for j := range first {
			first[j] = stops[first[j]]
		}
		done := x.fault("stop-all-gracefully-start-quorum", "stop "+x.ids(stops)+" start "+x.ids(first))
		for _, i := range stops {
			x.stopReplica(i, syscall.SIGTERM)
		}
		for _, i := range first {
			x.restart(i)
		}
		x.probeAny(ctx, "after stop-all-gracefully-start-quorum: "+x.ids(first)+" started", first, probeBound)
		for i := range n {
			if x.down[i].Load() {
				x.restart(i)
			}
		}
		done()
	case k < 45:
		order := r.Perm(n)
		done := x.fault("rolling-restart-"+sigName(sig), x.ids(order))
		for _, i := range order {
			x.stopReplica(i, sig)
			x.probeAny(ctx, "rolling restart: "+x.reps[i].id+" down", x.others(i), probeBound)
			x.restart(i)
			x.probe(ctx, "rolling restart: "+x.reps[i].id+" back", i, x.probeLock(), probeBound, false)
		}
		done()
	case k < 90:
		stops, starts := r.Perm(n), r.Perm(n)
		first := starts
		kind := "stop-all-start-all"
		if k >= 60 {
			first, kind = starts[:n/2+1], "stop-all-start-quorum"
		}
		done := x.fault(kind, "stop "+x.ids(stops)+" start "+x.ids(starts)+" ("+sigName(sig)+")")
		for _, i := range stops {
			x.stopReplica(i, sig)
		}
		for _, i := range first {
			x.restart(i)
		}
		x.probeAny(ctx, "after "+kind+": "+x.ids(first)+" started", first, probeBound)
		for _, i := range starts[len(first):] {
			x.restart(i)
		}
		done()
	default:
		x.mixedStep(ctx, r.IntN(60))
	}
}

// stopReplica stops replica i with sig (SIGTERM: gracefully; the current
// build keeps its clients' leases until their windows end).
func (x *Harness) stopReplica(i int, sig syscall.Signal) {
	x.down[i].Store(true)
	if sig == syscall.SIGTERM {
		x.noteTerm(i)
	}
	x.reps[i].stop(sig, 10*time.Second)
}

// noteTerm records a graceful stop of replica i if it runs the previous
// release (upgrade class). That release's stop released its HTTP clients'
// leases at once, inside the windows it had reported to them (fixed in
// 2a69af6): the workload ends such a client's window at the stop. The
// current build's stop is not excused: it must keep each lease until its
// window ends.
func (x *Harness) noteTerm(i int) {
	if x.o.OldBin == "" || x.reps[i].bin != x.o.OldBin {
		return
	}
	x.mu.Lock()
	x.oldTerms[i] = append(x.oldTerms[i], now())
	x.mu.Unlock()
}

func sigName(s syscall.Signal) string {
	if s == syscall.SIGKILL {
		return "kill"
	}
	return "term"
}

// all and others list replica indexes.
func (x *Harness) all() []int { return x.others(-1) }

func (x *Harness) others(excl int) []int {
	var out []int
	for j := range x.o.Replicas {
		if j != excl {
			out = append(out, j)
		}
	}
	return out
}

// noteDiskExit records that a replica whose disk was full exited (the
// outcome the disk class requires of it: it stops serving).
func (x *Harness) noteDiskExit(i int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.diskExits[i]++
	x.h.Notes = append(x.h.Notes, fmt.Sprintf("%s exited while its disk was full (restarted once freed)", x.reps[i].id))
}

// countLines counts the lines of a file that contain s.
func countLines(path, s string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), s)
}
