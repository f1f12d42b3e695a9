package chaos

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Self-tests of the linearizability check on the history shape that left
// in-process restart seed 72 undecided: one log entry (the expiry sweep
// after the cluster came back from stop-all/start-all) granted and expired
// a long queue of acquisitions whose sessions had died, so every event of
// that entry has the same commit window — a single instant of fake time —
// and porcupine sees them all as concurrent.

// expiryCascade is the clean history (tokens 1 and 2 on "x") followed by
// one log entry that grants and expires n queued acquisitions (tokens 3 …
// n+2), then a client's acquisition (token n+3) that waited through it.
func expiryCascade(n int) *hb {
	b := clean()
	const at = 500
	for i := range n {
		tok := uint64(3 + i)
		b.ev(LogEvent{Index: 10, Kind: EvGranted, Lock: "x", Token: tok, At: at, Observed: at})
		b.ev(LogEvent{Index: 10, Kind: EvReleased, Lock: "x", Token: tok, Reason: "session-expired", At: at, Observed: at})
	}
	last := uint64(n + 3)
	b.op(Op{Client: 3, Kind: OpAcquire, Lock: "x", Invoke: 400, Return: 510, Result: Granted, Token: last, ValidTo: 600}).
		ev(LogEvent{Index: 10, Kind: EvGranted, Lock: "x", Token: last, At: at, Observed: at}).
		op(Op{Client: 3, Kind: OpRelease, Lock: "x", Token: last, Invoke: 600, Return: 610, Result: OK}).
		ev(LogEvent{Index: 11, Kind: EvReleased, Lock: "x", Token: last, Reason: "owner", At: 601, Observed: 605})
	return b
}

// porcupineBudget bounds the linearizability check in these tests: far
// above what a decidable history of this size needs (milliseconds), so a
// verdict of Unknown means the search is exponential, not that the machine
// is slow.
const porcupineBudget = 20 * time.Second

func TestCheckDecidesExpiryCascade(t *testing.T) {
	r := Check(expiryCascade(40).h, CheckOptions{PorcupineTimeout: porcupineBudget})
	if r.Porcupine != porcupine.Ok || !r.OK() {
		t.Fatalf("porcupine %s after %d ms, violations %+v", r.Porcupine, r.PorcupineMillis, r.Violations)
	}
}

// The pruning that makes the cascade decidable must not hide violations:
// each mutation of the cascade is still reported by porcupine as Illegal
// (not Unknown, not a pass), with the hard part of the history in place.
func TestCheckCascadeMutationsAreIllegal(t *testing.T) {
	const n = 40
	last := uint64(n + 3)
	for _, tc := range []struct {
		name   string
		mutate func(b *hb)
	}{
		{"overlapping grants: a second holder while token n+3 holds", func(b *hb) {
			// The log is in order (granted after the release at index
			// 11), but the client was told "granted" while the
			// previous holder's release had not even been called.
			b.op(Op{Client: 4, Kind: OpAcquire, Lock: "x", Invoke: 515, Return: 530, Result: Granted, Token: last + 1, ValidTo: 590}).
				ev(LogEvent{Index: 12, Kind: EvGranted, Lock: "x", Token: last + 1, At: 611, Observed: 612})
		}},
		{"overlapping grants in the log: granted inside the cascade before its predecessor's expiry", func(b *hb) {
			// A client's grant of a cascade token returned before the
			// entry that granted it (and expired the one before it)
			// committed.
			b.op(Op{Client: 4, Kind: OpAcquire, Lock: "x", Invoke: 300, Return: 450, Result: Granted, Token: 20, ValidTo: 460})
		}},
		{"token reused: token 1 acknowledged to a second acquisition", func(b *hb) {
			b.op(Op{Client: 5, Kind: OpTryAcquire, Lock: "x", Invoke: 700, Return: 710, Result: Granted, Token: 1, ValidTo: 720})
		}},
		{"token reused: a cascade token acknowledged after the cascade", func(b *hb) {
			b.op(Op{Client: 5, Kind: OpTryAcquire, Lock: "x", Invoke: 700, Return: 710, Result: Granted, Token: 7, ValidTo: 720})
		}},
		{"locked answered while the lock was free after the cascade", func(b *hb) {
			b.op(Op{Client: 6, Kind: OpTryAcquire, Lock: "x", Invoke: 700, Return: 710, Result: Locked})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := expiryCascade(n)
			tc.mutate(b)
			r := Check(b.h, CheckOptions{PorcupineTimeout: porcupineBudget})
			if r.Porcupine != porcupine.Illegal {
				t.Fatalf("porcupine %s after %d ms (want Illegal), violations %+v", r.Porcupine, r.PorcupineMillis, r.Violations)
			}
			requireViolation(t, r, CheckPorcupine)
			t.Logf("porcupine %s in %d ms; violated %v", r.Porcupine, r.PorcupineMillis, r.ViolatedChecks())
		})
	}
}

// readGzipHistory reads a gzip-compressed history JSON from testdata.
func readGzipHistory(t *testing.T, name string) *History {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var h History
	if err := json.NewDecoder(z).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return &h
}

// The real history: lock-0 of in-process restart seed 72 (161 client
// operations, 253 log events; 179 porcupine operations, up to 47 in flight
// at once, 22 grant/release pairs in log entry 671). It was Unknown after
// 60 s; decided, it is linearizable, and each planted violation is Illegal.
func TestCheckRestartSeed72Lock0(t *testing.T) {
	const s = int64(time.Millisecond)
	h := readGzipHistory(t, "restart-seed72-lock0.json.gz")
	r := Check(h, CheckOptions{PorcupineTimeout: porcupineBudget})
	if r.Porcupine != porcupine.Ok || !r.OK() {
		t.Fatalf("porcupine %s after %d ms, violations %+v", r.Porcupine, r.PorcupineMillis, r.Violations)
	}
	grantOf := func(h *History, token uint64) *Op {
		for i := range h.Ops {
			if op := &h.Ops[i]; op.Result == Granted && op.Token == token {
				return op
			}
		}
		t.Fatalf("no client grant of token %d", token)
		return nil
	}
	for _, tc := range []struct {
		name   string
		mutate func(h *History)
	}{
		{"overlapping grants: token 203 acknowledged while the expired queue (142…202) still held the lock", func(h *History) {
			op := grantOf(h, 203) // granted by log entry 671, at 25519.635 ms
			op.Return = h.Start + 24500*s
		}},
		{"token reused: cascade token 190 acknowledged to a new acquisition after the cascade", func(h *History) {
			h.Ops = append(h.Ops, Op{ID: len(h.Ops), Client: 20, Kind: OpTryAcquire, Lock: "lock-0", Invoke: h.Start + 26000*s, Return: h.Start + 26010*s, Result: Granted, Token: 190, ValidTo: h.Start + 26100*s})
		}},
		{"token reused: token 203 acknowledged twice", func(h *History) {
			op := *grantOf(h, 203)
			op.ID, op.Client, op.Owner = len(h.Ops), 21, ""
			op.Invoke, op.Return, op.ValidTo = h.Start+26000*s, h.Start+26010*s, h.Start+26100*s
			h.Ops = append(h.Ops, op)
		}},
		{"locked answered while the lock was free (between the release of token 232 and the grant of 246)", func(h *History) {
			h.Ops = append(h.Ops, Op{ID: len(h.Ops), Client: 22, Kind: OpTryAcquire, Lock: "lock-0", Invoke: h.Start + 32000*s, Return: h.Start + 32010*s, Result: Locked})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := readGzipHistory(t, "restart-seed72-lock0.json.gz")
			tc.mutate(h)
			r := Check(h, CheckOptions{PorcupineTimeout: porcupineBudget})
			if r.Porcupine != porcupine.Illegal {
				t.Fatalf("porcupine %s after %d ms (want Illegal), violations %+v", r.Porcupine, r.PorcupineMillis, r.Violations)
			}
			requireViolation(t, r, CheckPorcupine)
			t.Logf("porcupine %s in %d ms; violated %v; %v", r.Porcupine, r.PorcupineMillis, r.ViolatedChecks(), r.Violations[len(r.Violations)-1])
		})
	}
}

// What porcupine still cannot decide quickly: many read-only answers in
// flight at once (here 40 try-acquires answered "locked" during one hold)
// followed by a violation — every subset of them is a state of the search
// before it can call the history Illegal. The harness must then report
// Unknown under its own check, with the partition's load, and fail the run.
func TestCheckUndecidedIsReportedApart(t *testing.T) {
	b := newHB().
		op(Op{Client: 0, Kind: OpAcquire, Lock: "x", Invoke: 0, Return: 10, Result: Granted, Token: 1, ValidTo: 900}).
		ev(LogEvent{Index: 1, Kind: EvGranted, Lock: "x", Token: 1, At: 1, Observed: 5})
	for i := range 40 {
		b.op(Op{Client: 1 + i, Kind: OpTryAcquire, Lock: "x", Invoke: 100, Return: 800, Result: Locked})
	}
	b.op(Op{Client: 0, Kind: OpRelease, Lock: "x", Token: 1, Invoke: 900, Return: 910, Result: OK}).
		ev(LogEvent{Index: 2, Kind: EvReleased, Lock: "x", Token: 1, Reason: "owner", At: 901, Observed: 905}).
		op(Op{Client: 41, Kind: OpTryAcquire, Lock: "x", Invoke: 950, Return: 960, Result: Locked})
	// 2^40 states cannot be searched in 200 ms on any machine.
	r := Check(b.h, CheckOptions{PorcupineTimeout: 200 * time.Millisecond})
	if r.Porcupine != porcupine.Unknown || r.OK() {
		t.Fatalf("porcupine %s, violations %+v", r.Porcupine, r.Violations)
	}
	if got := r.ViolatedChecks(); len(got) != 1 || got[CheckPorcupineUndecided] != 1 {
		t.Fatalf("violated %v, want only %s", got, CheckPorcupineUndecided)
	}
	want := "hardest partition: lock x, 43 operations, up to 40 in flight at once"
	if d := r.Violations[0].Detail; !strings.Contains(d, want) {
		t.Fatalf("detail %q does not say %q", d, want)
	}
}
