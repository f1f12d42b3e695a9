package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/admin"
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

// lockOpts are the flags of raftlock lock.
type lockOpts struct {
	ttl     time.Duration
	wait    time.Duration // 0: wait forever
	try     bool
	n       int // semaphore limit (0: a lock)
	grace   time.Duration
	owner   string
	name    string
	command []string
}

// signalled is called when the supervisor signals the command (tests
// measure the margin from it).
var signalled = func(sig syscall.Signal, at time.Time) {}

func (e *env) parseLock(args []string) (lockOpts, error) {
	var o lockOpts
	fs := flag.NewFlagSet("lock", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.DurationVar(&o.ttl, "ttl", 10*time.Second, "TTL of the lease's session: how long the cluster keeps the lock after this process (or its replica) stops renewing it")
	fs.DurationVar(&o.wait, "wait", 0, "give up (exit 3) if the lock is not acquired within this time (0: wait as long as it takes)")
	fs.BoolVar(&o.try, "try", false, "do not wait: exit 3 at once if the lock is held")
	fs.IntVar(&o.n, "n", 0, "a semaphore: NAME admits up to N holders at once (each holds one permit)")
	fs.DurationVar(&o.grace, "grace", 0, "SIGTERM this long before the SIGKILL, which comes TTL/10 before the lease could end (default TTL/5)")
	fs.StringVar(&o.owner, "owner", "", "description of the holder shown to operators (default: raftlock lock on HOST pid PID)")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: raftlock lock [flags] NAME -- CMD [ARGS...]\n\nRuns CMD while holding NAME; CMD gets "+envLockName+" and "+envLockToken+".\nIf the lease is lost (revoked, or not renewed in time), CMD gets SIGTERM, then SIGKILL after -grace,\nbefore the lease can end and the lock be granted to anyone else.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w: %v", errUsage, err)
	}
	rest := fs.Args()
	if len(rest) < 3 || rest[1] != "--" {
		return o, fmt.Errorf("%w: lock [flags] NAME -- CMD [ARGS...]", errUsage)
	}
	o.name, o.command = rest[0], rest[2:]
	if o.grace == 0 {
		o.grace = o.ttl / 5
	}
	switch {
	case o.ttl <= 0 || o.wait < 0 || o.n < 0:
		return o, fmt.Errorf("%w: -ttl must be positive, -wait and -n not negative", errUsage)
	case o.grace <= 0 || o.grace+killMargin(o.ttl) >= o.ttl/3:
		// A renewal says the lease is valid for about 0.6 TTL at least (a
		// session's keepalive every TTL/3, its drift margin TTL/20), and
		// the next comes TTL/8 later: a grace plus the kill margin (TTL/10)
		// of a third of the TTL or more could signal a command whose lease
		// is fine.
		return o, fmt.Errorf("%w: -grace %v: want more than 0 and less than %v (a third of the TTL less TTL/10)", errUsage, o.grace, o.ttl/3-killMargin(o.ttl))
	case o.try && o.wait > 0:
		return o, fmt.Errorf("%w: -try and -wait exclude each other", errUsage)
	}
	if o.owner == "" {
		host, _ := os.Hostname()
		o.owner = fmt.Sprintf("raftlock lock on %s pid %d", host, os.Getpid())
	}
	return o, nil
}

// lock runs raftlock lock and returns the exit status.
func (e *env) lock(ctx context.Context, args []string) (int, error) {
	o, err := e.parseLock(args)
	if err != nil {
		return exitUsage, err
	}
	acq, err := e.acquire(ctx, o)
	if err != nil {
		if k := kindOf(err); k == admin.ErrKindLocked || k == admin.ErrKindTimeout {
			return exitNotAcquired, fmt.Errorf("%s not acquired: %w", o.name, err)
		}
		return exitError, err
	}
	// The acquire's validity counts from when it was sent, which for a
	// wait in the queue is long ago: ask once more, now.
	deadline, err := e.leaseValidity(ctx, acq.Handle)
	if err != nil {
		e.release(acq.Handle)
		return exitError, fmt.Errorf("%s acquired, then: %w", o.name, err)
	}
	cmd := exec.Command(o.command[0], o.command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, e.stdout, e.stderr
	cmd.Env = append(os.Environ(), envLockName+"="+o.name, envLockToken+"="+strconv.FormatUint(acq.Token, 10))
	if err := cmd.Start(); err != nil {
		e.release(acq.Handle)
		return exitError, err
	}
	code, lost := e.supervise(o, acq, deadline, cmd)
	if lost != nil {
		e.release(acq.Handle) // in case it still holds (the replica was only slow)
		return exitLeaseLost, fmt.Errorf("lease on %s lost while the command ran (%v); the command was signalled and exited with status %d", o.name, lost, code)
	}
	if err := e.release(acq.Handle); err != nil {
		fmt.Fprintf(e.stderr, "raftlock lock: releasing %s: %s (the lease ends by itself within the TTL)\n", shown(o.name), shown(err))
	}
	return code, nil
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
	if o.wait > 0 {
		until = time.Now().Add(o.wait)
	}
	for {
		poll := 30 * time.Second
		if !until.IsZero() {
			poll = min(poll, time.Until(until))
		}
		req := admin.AcquireRequest{Lock: o.name, Wait: !o.try, TTLMS: o.ttl.Milliseconds(), Owner: o.owner}
		if !o.try {
			req.TimeoutMS = max(poll.Milliseconds(), 1)
		}
		if o.n > 0 {
			req.Limit, req.Permits = o.n, 1
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

func (e *env) release(handle string) error {
	ctx, cancel := context.WithTimeout(context.Background(), e.g.timeout)
	defer cancel()
	err := e.c.call(ctx, "POST", "/v1/release", admin.ReleaseRequest{Handle: handle}, nil, 0)
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
	lost     error     // the lease ended
}

// supervise renews the lease and keeps the command within it until the
// command exits; it returns the command's exit status and, if the lease
// was lost meanwhile, why.
func (e *env) supervise(o lockOpts, acq admin.AcquireResponse, deadline time.Time, cmd *exec.Cmd) (int, error) {
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()

	renewCtx, stopRenew := context.WithCancel(context.Background())
	defer stopRenew()
	news := make(chan renewal, 1)
	go e.renew(renewCtx, acq.Handle, o.ttl, news)

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	// The command is killed killMargin before the deadline: the session's
	// own margin (TTL/20) is for clock drift, this one for a supervisor
	// that wakes late on a loaded machine.
	safe := func(d time.Time) time.Time { return d.Add(-killMargin(o.ttl)) }
	w := watch{deadline: safe(deadline)}
	var lost error
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		act, wake := plan(w, time.Now(), o.grace)
		switch act {
		case actTerm:
			w.termSent = time.Now()
			cmd.Process.Signal(syscall.SIGTERM)
			signalled(syscall.SIGTERM, w.termSent)
			if lost == nil {
				lost = errors.New("not renewed in time: the replica did not answer")
			}
			fmt.Fprintf(e.stderr, "raftlock lock: lease on %s ending (%s): SIGTERM sent\n", shown(o.name), shown(lost))
		case actKill:
			w.killSent = true
			cmd.Process.Signal(syscall.SIGKILL)
			signalled(syscall.SIGKILL, time.Now())
			if lost == nil {
				lost = errors.New("not renewed in time: the replica did not answer")
			}
			fmt.Fprintf(e.stderr, "raftlock lock: lease on %s ending: SIGKILL sent\n", shown(o.name))
		}
		if !wake.IsZero() {
			timer.Reset(max(time.Until(wake), 0))
		}
		select {
		case <-exited:
			return exitStatus(waitErr), lost
		case r := <-news:
			if r.lost != nil && !w.lost {
				w.lost, lost = true, r.lost
			}
			if safe(r.deadline).After(w.deadline) && !w.lost {
				w.deadline = safe(r.deadline)
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
		case err == nil:
			r.lost = errors.New(l.Error)
		case kindOf(err) == admin.ErrKindUnknownHandle:
			r.lost = err
		default:
			continue // no news: the deadline stands
		}
		if !send(ctx, news, r) || r.lost != nil {
			return
		}
	}
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
