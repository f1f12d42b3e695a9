package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/admin"
	"github.com/raftlock/raftlock/internal/fsmwire"
)

// raftlock lock: the lease is a client-kept lease of the admin API (its own
// session, TTL -ttl), renewed by GET /v1/lease every TTL/8, while a long
// poll of GET /v1/lease/wait watches for its end. Each renewal says how
// long the lease stays valid at least; counted from when the request was
// sent, that never overestimates it. The
// supervisor (plan, watchdog.go) SIGKILLs the command TTL/10 before that
// deadline (and SIGTERMs it -grace before that), so a command whose replica is
// paused or unreachable is stopped before the cluster can expire the
// session and grant the lock to anyone else. A lease the replica reports
// ended (a revocation) is acted on at once — the lock may then already be
// someone else's: that is what a revocation does. Limits: if raftlock
// itself is paused, nothing signals the command (the server releases a
// lease nobody renews within the TTL); the fencing token in
// RAFTLOCK_LOCK_TOKEN is what protects the resource then.

// Environment variables the command run under a lock gets.
const (
	envLockName  = "RAFTLOCK_LOCK_NAME"
	envLockToken = "RAFTLOCK_LOCK_TOKEN" // the fencing token: pass it to the resources the command writes
)

// lockOpts are the flags and arguments of raftlock lock.
type lockOpts struct {
	ttl       durationFlag
	wait      durationFlag // 0: wait forever
	try       bool
	n         countFlag // semaphore limit (0: a lock)
	grace     durationFlag
	lockDelay durationFlag
	owner     string
	name      string
	command   []string
}

// signalled is called when the supervisor signals the command (tests
// measure the margin from it).
var signalled = func(sig syscall.Signal, at time.Time) {}

var lockCommand = command{
	name: "lock", synopsis: "[flags] NAME -- CMD [ARGS...]",
	summary: "run CMD while holding lock NAME",
	help: "CMD gets " + envLockName + " and " + envLockToken + " (the fencing token: pass it to what CMD writes).\n" +
		"If the lease is lost (revoked, or not renewed in time), CMD gets SIGTERM, then SIGKILL after -grace,\n" +
		"before the lease can end and the lock be granted to anyone else.\n\n" +
		"Exit status: CMD's; 3 not acquired (-try, -wait); 4 the lease was lost while CMD ran;\n" +
		"127 CMD could not be started; 2 a usage mistake; 1 another error.",
	flagsFirst: true,
	setup:      lockArgs,
}

func lockArgs(e *env, fs *flag.FlagSet) func([]string) (runner, error) {
	o := &lockOpts{ttl: durationFlag{d: 10 * time.Second}, n: countFlag{what: "the number of holders a semaphore admits (0: a lock)"}}
	fs.Var(&o.ttl, "ttl", "the `duration` of the lease's session (its TTL): how long the cluster keeps the lock after this process (or its replica) stops renewing it")
	fs.Var(&o.wait, "wait", "give up (exit 3) if the lock is not acquired within this `duration` (0: wait as long as it takes)")
	fs.BoolVar(&o.try, "try", false, "do not wait: exit 3 at once if the lock is held")
	fs.Var(&o.n, "n", "a semaphore: NAME admits up to `N` holders at once (each holds one permit)")
	fs.Var(&o.grace, "grace", "SIGTERM this `duration` before the SIGKILL, which comes TTL/10 before the lease could end (default TTL/5)")
	fs.Var(&o.lockDelay, "lock-delay", "if the lease ends without a release (this process or its replica stopped), nobody gets the lock for this `duration` (at most 1h; 0: the replica's -lock-delay)")
	fs.StringVar(&o.owner, "owner", "", "description of the holder shown to operators (default: raftlock lock on HOST pid PID)")
	return func(rest []string) (runner, error) {
		if err := o.check(rest); err != nil {
			return nil, err
		}
		return func(ctx context.Context) (int, error) { return e.lock(ctx, *o) }, nil
	}
}

// check reads NAME -- CMD and checks the flags: one message per mistake,
// in the units typed.
func (o *lockOpts) check(rest []string) error {
	if len(rest) < 3 || rest[1] != "--" {
		return usageErr("want NAME -- CMD [ARGS...], not %q (raftlock help lock)", rest)
	}
	o.name, o.command = rest[0], rest[2:]
	ttl := o.ttl.d
	switch {
	case ttl <= 0:
		return usageErr("-ttl %s: want a positive duration, such as 10s", o.ttl.typed())
	case ttl > fsmwire.MaxTTL:
		return usageErr("-ttl %s: want at most %s", o.ttl.typed(), short(fsmwire.MaxTTL))
	case o.wait.d < 0:
		return usageErr("-wait %s: want 0 (wait as long as it takes) or a positive duration", o.wait.typed())
	case o.try && o.wait.d > 0:
		return usageErr("-try and -wait exclude each other")
	case o.grace.d < 0:
		return usageErr("-grace %s: want a positive duration (default a fifth of -ttl)", o.grace.typed())
	case o.lockDelay.d < 0 || o.lockDelay.d > fsmwire.MaxLockDelay:
		return usageErr("-lock-delay %s: want 0 to %s", o.lockDelay.typed(), short(fsmwire.MaxLockDelay))
	}
	if o.grace.d == 0 {
		o.grace.d = ttl / 5
	}
	// A renewal says the lease is valid for about 0.6 TTL at least (a
	// session's keepalive every TTL/3, its drift margin TTL/20), and the
	// next comes TTL/8 later: a grace plus the kill margin (TTL/10) of a
	// third of the TTL or more could signal a command whose lease is fine.
	if limit := ttl/3 - killMargin(ttl); o.grace.d >= limit {
		return usageErr("-grace %s: want less than %s with -ttl %s (a third of the TTL, less the TTL/10 kill margin)", o.grace.typed(), short(limit), o.ttl.typed())
	}
	if o.owner == "" {
		host, _ := os.Hostname()
		o.owner = fmt.Sprintf("raftlock lock on %s pid %d", host, os.Getpid())
	}
	return nil
}

// ttlRefusal matches the API's refusal of a TTL outside the cluster's
// range (admin's acquire: "ttl_ms N outside [MIN, MAX] ...").
var ttlRefusal = regexp.MustCompile(`^ttl_ms -?\d+ outside \[(\d+), (\d+)\]`)

// lock runs raftlock lock and returns the exit status.
func (e *env) lock(ctx context.Context, o lockOpts) (int, error) {
	acq, err := e.acquire(ctx, o)
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.Body.Error == admin.ErrKindBadRequest {
			if m := ttlRefusal.FindStringSubmatch(ae.Body.Detail); m != nil {
				lo, _ := strconv.ParseInt(m[1], 10, 64)
				return exitUsage, usageErr("-ttl %s: below this cluster's minimum, %s (the replicas' Raft timing sets it)", o.ttl.typed(), short(time.Duration(lo)*time.Millisecond))
			}
		}
		if k := kindOf(err); k == admin.ErrKindLocked || k == admin.ErrKindTimeout {
			return exitNotAcquired, fmt.Errorf("%s not acquired: %w", o.name, err)
		}
		return exitError, err
	}
	// The acquire's validity counts from when it was sent, which for a
	// wait in the queue is long ago: ask once more, now.
	deadline, err := e.leaseValidity(ctx, acq.Handle)
	if err != nil {
		e.release(acq.Handle, e.g.timeout)
		return exitError, fmt.Errorf("%s acquired, then: %w", o.name, err)
	}
	cmd := exec.Command(o.command[0], o.command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.stdout, e.stderr
	cmd.Env = append(os.Environ(), envLockName+"="+o.name, envLockToken+"="+strconv.FormatUint(acq.Token, 10))
	if err := cmd.Start(); err != nil {
		released := "released"
		if rerr := e.release(acq.Handle, e.g.timeout); rerr != nil {
			released = "its lease ends by itself within -ttl"
		}
		return exitNoCommand, fmt.Errorf("cannot start %s: %v (%s was %s)", o.command[0], unwrapExec(err), o.name, released)
	}
	code, lost, ended := e.supervise(o, acq, deadline, cmd)
	if lost != nil {
		if !ended {
			// Not renewed in time: the replica may only be slow, and a
			// release then frees the lock a little early — but not at
			// the cost of waiting for a replica that does not answer: by
			// now the lease ends within the kill margin anyway.
			e.release(acq.Handle, killMargin(o.ttl.d))
		}
		return exitLeaseLost, fmt.Errorf("lease on %s lost while the command ran (%v); the command was signalled and exited with status %d", o.name, lost, code)
	}
	if err := e.release(acq.Handle, e.g.timeout); err != nil {
		fmt.Fprintf(e.stderr, "raftlock lock: releasing %s: %s (the lease ends by itself within the TTL)\n", shown(o.name), shown(err))
	}
	return code, nil
}

// unwrapExec drops exec's "exec: " prefix and the command name it repeats.
func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// leaseValidity asks about the lease (renewing it) and returns until when
// it is valid at least.
func (e *env) leaseValidity(ctx context.Context, handle string) (time.Time, error) {
	var l admin.LeaseJSON
	sent := time.Now()
	if err := e.c.call(ctx, "GET", "/v1/lease?"+url.Values{"handle": {handle}}.Encode(), nil, &l, 0); err != nil {
		return time.Time{}, err
	}
	if !l.Valid {
		return time.Time{}, fmt.Errorf("lease lost: %s", l.Error)
	}
	return sent.Add(time.Duration(l.ValidForMS) * time.Millisecond), nil
}

// acquire takes the lease, retrying the bounded waits of the API until
// -wait passes.
func (e *env) acquire(ctx context.Context, o lockOpts) (admin.AcquireResponse, error) {
	var until time.Time
	if o.wait.d > 0 {
		until = time.Now().Add(o.wait.d)
	}
	for {
		poll := 30 * time.Second
		if !until.IsZero() {
			poll = min(poll, time.Until(until))
		}
		req := admin.AcquireRequest{Lock: o.name, Wait: !o.try, TTLMS: o.ttl.d.Milliseconds(), LockDelayMS: o.lockDelay.d.Milliseconds(), Owner: o.owner}
		if !o.try {
			req.TimeoutMS = max(poll.Milliseconds(), 1)
		}
		if o.n.n > 0 {
			req.Limit, req.Permits = int(min(o.n.n, math.MaxInt32)), 1
		}
		var out admin.AcquireResponse
		err := e.c.call(ctx, "POST", "/v1/acquire", req, &out, poll+e.g.timeout)
		switch {
		case err == nil:
			return out, nil
		case kindOf(err) == admin.ErrKindTimeout && (until.IsZero() || time.Now().Before(until)) && ctx.Err() == nil:
			continue // the API's wait ended, ours has not
		case kindOf(err) == admin.ErrKindClientQuota && !o.try && (until.IsZero() || time.Now().Before(until)):
			// The server's waits are full for this principal (others share
			// its token): wait outside the queue and ask again.
			retry := time.NewTimer(quotaRetry)
			select {
			case <-retry.C:
			case <-ctx.Done():
				retry.Stop()
				return out, err
			}
		default:
			return out, err
		}
	}
}

// quotaRetry is how long a waiting acquire refused by an HTTP quota waits
// before it asks again.
var quotaRetry = time.Second

// release releases the lease of handle, waiting at most timeout for the
// replica's answer.
func (e *env) release(handle string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := e.c.call(ctx, "POST", "/v1/release", admin.ReleaseRequest{Handle: handle}, nil, timeout)
	if k := kindOf(err); k == admin.ErrKindNotHolder || k == admin.ErrKindUnknownHandle {
		return nil // ended already
	}
	return err
}

// killMargin is how long before the lease's deadline the command is
// killed.
func killMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// renewal is what one renewal learned.
type renewal struct {
	deadline time.Time // valid until then at least (zero: no news)
	lost     error     // the lease ended (the replica said so)
	stalled  string    // why the lease is not being renewed ("" : it is, or no news)
}

// supervise renews the lease and keeps the command within it until the
// command exits; it returns the command's exit status and, if the lease
// was lost meanwhile, why (ended: the replica said the lease ended; else
// it was not renewed in time).
func (e *env) supervise(o lockOpts, acq admin.AcquireResponse, deadline time.Time, cmd *exec.Cmd) (code int, lost error, ended bool) {
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()

	renewCtx, stopRenew := context.WithCancel(context.Background())
	defer stopRenew()
	news := make(chan renewal, 1)
	go e.renew(renewCtx, acq.Handle, o.ttl.d, news)

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	// The command is killed killMargin before the deadline: the session's
	// own margin (TTL/20) is for clock drift, this one for a supervisor
	// that wakes late on a loaded machine.
	safe := func(d time.Time) time.Time { return d.Add(-killMargin(o.ttl.d)) }
	w := watch{deadline: safe(deadline)}
	stalled := "the replica did not answer" // until a renewal says better
	notRenewed := func() error {
		if lost == nil {
			lost = errors.New("not renewed in time: " + stalled)
		}
		return lost
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		act, wake := plan(w, time.Now(), o.grace.d)
		switch act {
		case actTerm:
			w.termSent = time.Now()
			cmd.Process.Signal(syscall.SIGTERM)
			signalled(syscall.SIGTERM, w.termSent)
			fmt.Fprintf(e.stderr, "raftlock lock: lease on %s ending (%s): SIGTERM sent\n", shown(o.name), shown(notRenewed()))
		case actKill:
			w.killSent = true
			cmd.Process.Signal(syscall.SIGKILL)
			signalled(syscall.SIGKILL, time.Now())
			notRenewed()
			fmt.Fprintf(e.stderr, "raftlock lock: lease on %s ending: SIGKILL sent\n", shown(o.name))
		}
		if !wake.IsZero() {
			timer.Reset(max(time.Until(wake), 0))
		}
		select {
		case <-exited:
			return exitStatus(waitErr), lost, w.lost
		case r := <-news:
			if r.lost != nil && !w.lost {
				w.lost, lost = true, r.lost
			}
			if safe(r.deadline).After(w.deadline) && !w.lost {
				w.deadline = safe(r.deadline)
			}
			if r.stalled != "" {
				stalled = r.stalled
			}
		case s := <-sigs:
			cmd.Process.Signal(s) // the command decides; its exit ends the lock
		case <-timer.C:
		}
		timer.Stop()
	}
}

// renew keeps the lease: it asks about it (which renews a client-kept
// lease and says how long it stays valid) every TTL/8, with short requests
// so that a validity counted from when the request was sent is close to
// the truth; and it long-polls for the lease's end in between, so that a
// revocation is seen at once. Only the short requests move the deadline.
// When the renewals fail, or answer with less than half a TTL left (the
// replica's session keepalives are not succeeding), it reports why, so
// that the command's signal names the cause (no quorum, not "no answer").
func (e *env) renew(ctx context.Context, handle string, ttl time.Duration, news chan<- renewal) {
	go e.watchEnd(ctx, handle, ttl, news)
	every := max(ttl/8, 50*time.Millisecond)
	path := "/v1/lease?" + url.Values{"handle": {handle}}.Encode()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var l admin.LeaseJSON
		sent := time.Now()
		err := e.c.call(ctx, "GET", path, nil, &l, every)
		var r renewal
		switch {
		case err == nil && l.Valid:
			r.deadline = sent.Add(time.Duration(l.ValidForMS) * time.Millisecond)
			if time.Duration(l.ValidForMS)*time.Millisecond < ttl/2 {
				r.stalled = e.whyNotRenewed(ctx, every)
			}
		case err == nil:
			r.lost = errors.New(l.Error)
		case kindOf(err) == admin.ErrKindUnknownHandle:
			r.lost = err
		case ctx.Err() != nil:
			return
		default:
			r.stalled = failure(err) // no news: the deadline stands
		}
		if !send(ctx, news, r) || r.lost != nil {
			return
		}
	}
}

// failure says why a renewal failed, for people: the replica's answer, or
// that it did not answer.
func failure(err error) string {
	switch kindOf(err) {
	case "":
		return "the replica did not answer (" + err.Error() + ")"
	case admin.ErrKindNoQuorum:
		return "no quorum (" + err.Error() + ")"
	}
	return "the replica answered " + err.Error()
}

// whyNotRenewed asks the replica's status why its session is not being
// renewed: no quorum, no leader, or something else it reports.
func (e *env) whyNotRenewed(ctx context.Context, timeout time.Duration) string {
	var st admin.StatusJSON
	err := e.c.call(ctx, "GET", "/v1/status", nil, &st, timeout)
	var ae *apiError
	if errors.As(err, &ae) && ae.Code == 503 && jsonInto(ae.Raw, &st) == nil {
		err = nil // not ready: the body is the status
	}
	switch {
	case err != nil:
		return "the replica answers, but its session is not renewed (its status: " + failure(err) + ")"
	case st.Health.Voters > 0 && st.Health.Tolerates < 0:
		return "no quorum (" + st.Health.FaultTolerance + ")"
	case st.LeaderID == "":
		return "no quorum or no leader: the replica knows no leader (" + strings.Join(st.Health.Reasons, "; ") + ")"
	}
	return "the replica answers, but its session is not renewed (" + st.Health.FaultTolerance + ")"
}

// watchEnd long-polls GET /v1/lease/wait and reports the lease's end.
func (e *env) watchEnd(ctx context.Context, handle string, ttl time.Duration, news chan<- renewal) {
	poll := max(ttl, time.Second)
	path := "/v1/lease/wait?" + url.Values{"handle": {handle}, "timeout_ms": {strconv.FormatInt(poll.Milliseconds(), 10)}}.Encode()
	for ctx.Err() == nil {
		var l admin.LeaseJSON
		err := e.c.call(ctx, "GET", path, nil, &l, poll+e.g.timeout)
		switch {
		case err == nil && !l.Valid:
			send(ctx, news, renewal{lost: errors.New(l.Error)})
			return
		case err != nil && kindOf(err) != admin.ErrKindUnknownHandle:
			select { // the replica may be down: the renewals decide
			case <-ctx.Done():
			case <-time.After(min(ttl/8, time.Second)):
			}
		}
	}
}

func send(ctx context.Context, news chan<- renewal, r renewal) bool {
	select {
	case news <- r:
		return true
	case <-ctx.Done():
		return false
	}
}

func exitStatus(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return exitError
}
