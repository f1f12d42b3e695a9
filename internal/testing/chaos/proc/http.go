package proc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/raftlock/raftlock/internal/testing/chaos"
	_ "modernc.org/sqlite"
)

// ---- HTTP ----

type status struct {
	ID           string `json:"id"`
	State        string `json:"state"`
	LeaderID     string `json:"leader_id"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	Ready        bool   `json:"ready"`
	FSM          struct {
		LastToken uint64 `json:"last_token"`
	} `json:"fsm"`
}

type errorBody struct {
	Error  string `json:"error"`
	Detail string `json:"detail"`
}

// call makes one bounded HTTP request; it returns the status code (0 when
// no answer arrived) and decodes a 2xx body into out or an error body.
func (x *Harness) call(ctx context.Context, i int, method, path string, in, out any, timeout time.Duration) (int, errorBody, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+x.reps[i].httpAddr()+path, body)
	if err != nil {
		return 0, errorBody{}, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := x.hc.Do(req)
	if err != nil {
		return 0, errorBody{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var eb errorBody
	if resp.StatusCode/100 == 2 {
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				return resp.StatusCode, eb, fmt.Errorf("decode %s: %w", path, err)
			}
		}
		return resp.StatusCode, eb, nil
	}
	json.Unmarshal(b, &eb)
	return resp.StatusCode, eb, nil
}

func (x *Harness) status(ctx context.Context, i int) (status, error) {
	var st status
	code, eb, err := x.call(ctx, i, "GET", "/v1/status", nil, &st, 2*time.Second)
	if err == nil && code != 200 {
		err = fmt.Errorf("status %d: %s", code, eb.Error)
	}
	return st, err
}

// waitReady waits until every running replica is ready and they agree on
// a leader.
func (x *Harness) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		leaders := map[string]bool{}
		ok := true
		for i, r := range x.reps {
			if r.exited() {
				return fmt.Errorf("%s exited; see %s", r.id, r.logPath)
			}
			st, err := x.status(ctx, i)
			if err != nil || !st.Ready || st.LeaderID == "" {
				ok = false
				last = fmt.Sprintf("%s: %+v %v", r.id, st, err)
				break
			}
			leaders[st.LeaderID] = true
		}
		if ok && len(leaders) == 1 {
			return nil
		}
		if ok {
			last = fmt.Sprintf("leaders %v", leaders)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("replicas not ready within %v: %s", timeout, last)
}

// ---- probes and the end state ----

// probeClient numbers probe clients apart from the workers.
const probeClient = 1000

// probeLock is a fresh lock name for a probe.
func (x *Harness) probeLock() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return fmt.Sprintf("probe-%d", x.probes+1)
}

// probe acquires lock through replica i and releases it, retrying until
// bound; it records the operations and the probe (availability check) and
// reports whether it succeeded.
func (x *Harness) probe(ctx context.Context, what string, i int, lock string, bound time.Duration, resume bool) bool {
	p := chaos.Probe{What: what, Node: x.reps[i].id, Lock: lock, Start: now(), Resume: resume}
	p.Deadline = p.Start + int64(bound)
	deadline := time.Unix(0, p.Deadline)
	var errs []string
	for ctx.Err() == nil {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		x.mu.Lock()
		x.probes++
		client := probeClient + x.probes
		x.mu.Unlock()
		op := chaos.Op{Client: client, Node: x.reps[i].id, Kind: chaos.OpAcquire, Lock: lock, Invoke: now(), Deadline: p.Deadline}
		var ar acquireResp
		code, eb, err := x.call(ctx, i, "POST", "/v1/acquire", map[string]any{"lock": lock, "wait": true, "timeout_ms": left.Milliseconds()}, &ar, left+2*time.Second)
		op.Return = now()
		if err != nil || code != 200 {
			op.Result, op.Err, op.ErrKind = chaos.Fail, fmt.Sprintf("%d %s %v", code, eb.Error, err), errKind(eb.Error)
			x.addOp(op)
			if len(errs) < 3 {
				errs = append(errs, op.Err)
			}
			x.sleep(ctx, 200*time.Millisecond)
			continue
		}
		op.Result, op.Token = chaos.Granted, ar.Token
		rel := chaos.Op{Client: client, Node: x.reps[i].id, Kind: chaos.OpRelease, Lock: lock, Token: ar.Token, Invoke: now()}
		op.ValidTo = rel.Invoke
		x.addOp(op)
		code, eb, err = x.call(ctx, i, "POST", "/v1/release", map[string]string{"handle": ar.Handle}, nil, 4*x.o.TTL)
		rel.Return = now()
		if err == nil && code == 200 {
			rel.Result = chaos.OK
			x.addOp(rel)
			p.Done = now()
			break
		}
		rel.Result, rel.Err = chaos.Unknown, fmt.Sprintf("%d %s %v", code, eb.Error, err)
		x.addOp(rel)
		if len(errs) < 3 {
			errs = append(errs, "release: "+rel.Err)
		}
	}
	p.Err = strings.Join(errs, "; ")
	x.mu.Lock()
	x.h.Probes = append(x.h.Probes, p)
	x.mu.Unlock()
	return p.Done != 0
}

// probeAny probes through the first replica of is that runs.
func (x *Harness) probeAny(ctx context.Context, what string, is []int, bound time.Duration) bool {
	for _, i := range is {
		if !x.down[i].Load() && x.reps[i].running() {
			return x.probe(ctx, what, i, x.probeLock(), bound, false)
		}
	}
	x.mu.Lock()
	x.h.Probes = append(x.h.Probes, chaos.Probe{What: what, Node: "none", Start: now(), Deadline: now(), Err: "no replica of " + x.ids(is) + " runs"})
	x.mu.Unlock()
	return false
}

// resumeProbes checks that the healed cluster serves through every replica.
func (x *Harness) resumeProbes(ctx context.Context) {
	healed := time.Now()
	for i, r := range x.reps {
		left := max(probeBound, 60*time.Second-time.Since(healed))
		x.probe(ctx, "grants resume after the last fault healed", i, "probe-resume-"+r.id, left, true)
	}
}

// captureEndState waits for clean-ups (expiries, background releases) and
// reads the lock table: once every client let go, nothing may be held or
// queued (ghost-holder; the HTTP API names sessions, not owners). A session
// of a replica that stopped without closing it (the last of a stop-all has
// no quorum to close it) ends only by expiry, and every leader change gives
// sessions a fresh grace of a TTL: while leadership still moves (a loaded
// machine) that can take longer than the first 3 TTLs. So a table that
// still holds something is read again every TTL, up to 12 TTLs: a real
// ghost (held under a live session) stays, an expiring session's hold goes.
func (x *Harness) captureEndState(ctx context.Context) {
	x.sleep(ctx, 3*x.o.TTL)
	for waited := 3; ; waited++ {
		if x.readEndState(ctx) || waited >= 12 || ctx.Err() != nil {
			return
		}
		x.sleep(ctx, x.o.TTL)
	}
}

// readEndState reads the lock table into the history's EndState from the
// first replica that answers; it reports whether that table was empty (or
// no replica answered: nothing to wait for).
func (x *Harness) readEndState(ctx context.Context) bool {
	var out struct {
		Locks []struct {
			Name   string `json:"name"`
			Held   bool   `json:"held"`
			Holder *struct {
				Session uint64 `json:"session"`
				Token   uint64 `json:"token"`
			} `json:"holder"`
			Waiters []struct {
				Session uint64 `json:"session"`
			} `json:"waiters"`
		} `json:"locks"`
	}
	for i, r := range x.reps {
		code, eb, err := x.call(ctx, i, "GET", "/v1/locks?sync=1", nil, &out, 10*time.Second)
		if err != nil || code != 200 {
			x.logf("end state from %s: %d %s %v", r.id, code, eb.Error, err)
			continue
		}
		es := &chaos.EndState{At: now(), Node: r.id}
		for _, l := range out.Locks {
			if l.Held && l.Holder != nil {
				es.Holds = append(es.Holds, chaos.EndHold{Lock: l.Name, Session: l.Holder.Session, Owner: fmt.Sprintf("session-%d", l.Holder.Session), Token: l.Holder.Token})
			}
			for _, w := range l.Waiters {
				es.Holds = append(es.Holds, chaos.EndHold{Lock: l.Name, Session: w.Session, Owner: fmt.Sprintf("session-%d", w.Session), Waiter: true})
			}
		}
		x.h.EndState = es
		return len(es.Holds) == 0
	}
	x.h.Notes = append(x.h.Notes, "end state: no replica answered GET /v1/locks")
	return true
}

// errKind maps the HTTP API's error kinds to chaos.Op error kinds ("": no
// answer from the library).
func errKind(kind string) string {
	switch kind {
	case "":
		return ""
	case "no_quorum":
		return chaos.ErrNoQuorum
	case "session_expired":
		return chaos.ErrSessionExpired
	case "timeout":
		return chaos.ErrDeadline
	}
	return chaos.ErrOther
}
