package proc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	_ "modernc.org/sqlite"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/internal/testing/chaos"
)

// ---- workload ----

func (x *Harness) addOp(op chaos.Op) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	op.ID = x.nextOp
	x.nextOp++
	x.h.Ops = append(x.h.Ops, op)
	return len(x.h.Ops) - 1
}

func (x *Harness) setValidTo(i int, v int64) {
	x.mu.Lock()
	x.h.Ops[i].ValidTo = v
	x.mu.Unlock()
}

func (x *Harness) addWrite(w chaos.Write) {
	x.mu.Lock()
	x.h.Writes = append(x.h.Writes, w)
	x.mu.Unlock()
}

// fault counts a fault and returns a function that records its end.
func (x *Harness) fault(kind, target string) func() { return x.faultCut(kind, target, nil) }

// faultCut is fault for a fault that cuts the replicas cut (indexes) off
// from every quorum (chaos.FaultEvent.Cut); call it once they are cut.
func (x *Harness) faultCut(kind, target string, cut []int) func() {
	x.mu.Lock()
	x.h.AddFault(kind)
	x.mu.Unlock()
	x.logf("nemesis: %s %s", kind, target)
	var ids []string
	for _, i := range cut {
		ids = append(ids, x.reps[i].id)
	}
	start := now()
	return func() {
		x.mu.Lock()
		x.h.Nemesis = append(x.h.Nemesis, chaos.FaultEvent{Kind: kind, Target: target, Start: start, End: now(), Cut: ids})
		x.mu.Unlock()
	}
}

// endedBy returns when a lease acquired through replica i by a call
// invoked at from and answered at granted ended, if it was held until to:
// at the first graceful stop of the previous release within [from, to)
// (noteTerm; not before the answer), or at to.
func (x *Harness) endedBy(i int, from, granted, to int64) int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, t := range x.oldTerms[i] {
		if t >= from && t < to {
			return max(t, granted)
		}
	}
	return to
}

// pausedCh returns a channel closed when replica i resumes, or nil if it
// is not paused.
func (x *Harness) pausedCh(i int) chan struct{} {
	x.pmu.Lock()
	defer x.pmu.Unlock()
	return x.paused[i]
}

type acquireResp struct {
	Lock             string `json:"lock"`
	Token            uint64 `json:"token"`
	Handle           string `json:"handle"`
	ValidUntilUnixMS int64  `json:"valid_until_unix_ms"`
}

type leaseResp struct {
	Valid      bool   `json:"valid"`
	Error      string `json:"error"`
	ValidForMS int64  `json:"valid_for_ms"` // 0 from the previous release
}

// client is one Jepsen client: bound to one replica, it locks, writes
// through the fence into SQLite with its token, and unlocks.
func (x *Harness) client(ctx context.Context, c int) {
	ri := c % x.o.Replicas
	rng := rand.New(rand.NewPCG(uint64(x.o.Seed), uint64(c)+1))
	ttl := x.o.TTL
	node := x.reps[ri].id
	for time.Now().Before(x.end) && ctx.Err() == nil {
		if x.down[ri].Load() {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		lock := fmt.Sprintf("lock-%d", rng.IntN(x.o.Locks))
		wait := rng.Float64() < 0.75
		// A quarter of the acquisitions are client-kept (a session of their
		// own, released unless asked about within its TTL), as the raftlock
		// CLI acquires; the previous release ignores ttl_ms.
		kept := rng.Float64() < 0.25
		op := chaos.Op{Client: c, Node: node, Kind: chaos.OpAcquire, Lock: lock}
		if !wait {
			op.Kind = chaos.OpTryAcquire
		}
		timeout := ttl + time.Duration(rng.Int64N(int64(ttl)))
		body := map[string]any{"lock": lock, "wait": wait, "timeout_ms": timeout.Milliseconds()}
		if kept {
			body["ttl_ms"] = ttl.Milliseconds()
		}
		var ar acquireResp
		op.Invoke = now()
		op.Deadline = op.Invoke + int64(timeout)
		code, eb, err := x.call(ctx, ri, "POST", "/v1/acquire", body, &ar, timeout+6*ttl)
		op.Return = now()
		switch {
		case err == nil && code == 200:
			op.Result, op.Token = chaos.Granted, ar.Token
		case err == nil && code == 409 && eb.Error == "locked":
			op.Result = chaos.Locked
		default:
			op.Result = chaos.Fail
			op.Err, op.ErrKind = fmt.Sprintf("%d %s %v", code, eb.Error, err), errKind(eb.Error)
			if err != nil && op.Return-op.Invoke >= int64(timeout+6*ttl) {
				op.ErrKind = chaos.ErrDeadline // no answer at all within the call's bound
			}
		}
		idx := x.addOp(op)
		if op.Result != chaos.Granted {
			time.Sleep(time.Duration(rng.Int64N(int64(ttl / 4))))
			continue
		}
		validTo := time.UnixMilli(ar.ValidUntilUnixMS).UnixNano()

		// Think; a pause of our replica may hit here. A paused replica's
		// client (a thread of that process, in reality) resumes with its
		// old token and writes late.
		x.holding[c].Store(int32(ri))
		time.Sleep(time.Duration(rng.Int64N(int64(ttl / 3))))
		late := false
		if ch := x.pausedCh(ri); ch != nil {
			late = true
			select {
			case <-ch:
			case <-time.After(10 * ttl):
			}
		}
		x.holding[c].Store(-1)
		careful := !late && rng.Float64() < 0.5
		write := true
		if careful || late {
			// A careful client asks whether its lease is still valid; a late
			// one asks too (for the record: a replica just resumed from a
			// pause must not call an expired lease valid) but writes anyway.
			var lr leaseResp
			chk := chaos.Op{Client: c, Node: node, Kind: chaos.OpLeaseCheck, Lock: lock, Token: ar.Token, Invoke: now()}
			code, eb, err := x.call(ctx, ri, "GET", "/v1/lease?handle="+ar.Handle, nil, &lr, 2*ttl)
			chk.Return = now()
			switch {
			case err == nil && code == 200 && lr.Valid:
				chk.Result = chaos.Valid // the checker extends the window to it
				// and the window it reported, counted from the question,
				// holds too (a graceful stop keeps the lease until then).
				validTo = max(validTo, chk.Invoke+lr.ValidForMS*int64(time.Millisecond))
			case err == nil && code == 200:
				chk.Result, chk.Err = chaos.NotHolder, lr.Error
				write = late
			default:
				chk.Result, chk.Err = chaos.Unknown, fmt.Sprintf("%d %s %v", code, eb.Error, err)
				write = late
			}
			x.addOp(chk)
		}
		if write {
			for k := range 1 + rng.IntN(2) {
				value := fmt.Sprintf("c%d/op%d/%d", c, op.ID, k)
				w := chaos.Write{Client: c, Lock: lock, Token: ar.Token, Value: value, Late: late, Invoke: now()}
				err := x.fc.Exec(ctx, lock, ar.Token, func(tx *sql.Tx) error {
					_, err := tx.Exec(`INSERT INTO writes (resource, token, value) VALUES (?, ?, ?)`, lock, ar.Token, value)
					return err
				})
				w.Return = now()
				switch {
				case err == nil:
					w.Accepted = true
				case errors.Is(err, fence.ErrStaleToken):
					w.Rejected = true
				}
				if err != nil {
					w.Err = err.Error()
				}
				x.addWrite(w)
				if err != nil {
					break
				}
			}
		}
		rel := chaos.Op{Client: c, Node: node, Kind: chaos.OpRelease, Lock: lock, Token: ar.Token, Invoke: now()}
		code, eb, err = x.call(ctx, ri, "POST", "/v1/release", map[string]string{"handle": ar.Handle}, nil, 4*ttl)
		rel.Return = now()
		switch {
		case err == nil && code == 200:
			rel.Result = chaos.OK
		default:
			// 409 not_holder: the lease had been lost; the replica asks the
			// cluster to release it in the background, so when (or
			// whether) that commits is not known here.
			rel.Result = chaos.Unknown
			rel.Err = fmt.Sprintf("%d %s %v", code, eb.Error, err)
		}
		x.addOp(rel)
		// A graceful stop of a replica running the previous release closed
		// its HTTP session: the lease ended then (noteTerm).
		x.setValidTo(idx, x.endedBy(ri, op.Invoke, op.Return, min(validTo, rel.Invoke)))
		time.Sleep(time.Duration(rng.Int64N(int64(ttl / 8))))
	}
}
