package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raftlock/raftlock/admin"
)

// status: GET /v1/status?probe=1 (shown when not ready too: the answer is
// then 503 with the same body, and the command exits 1).
func (e *env) status(ctx context.Context) error {
	var st admin.StatusJSON
	err := e.c.call(ctx, "GET", "/v1/status?probe=1", nil, &st, 0)
	var ae *apiError
	notReady := errors.As(err, &ae) && ae.Code == 503 && jsonInto(ae.Raw, &st) == nil && st.ID != ""
	if err != nil && !notReady {
		return err
	}
	if perr := e.emit(st, func(t *tabwriter.Writer) {
		leader := st.LeaderID
		if leader == "" {
			leader = "none known"
		}
		row(t, "node", st.ID+" ("+st.State+")")
		row(t, "cluster", st.ClusterID)
		row(t, "leader", leader)
		row(t, "ready", yes(st.Health.Ready)+" "+strings.Join(st.Health.Reasons, "; "))
		row(t, "fault tolerance", st.Health.FaultTolerance)
		row(t, "term / commit / applied", fmt.Sprintf("%d / %d / %d", st.Term, st.CommitIndex, st.AppliedIndex))
		row(t, "cluster version", fmt.Sprintf("%d (this binary up to %d)", st.ClusterVersion, st.MaxClusterVersion))
		row(t, "locks held / waiters / sessions", fmt.Sprintf("%d / %d / %d", st.FSM.Held, st.FSM.Waiters, st.FSM.Sessions))
		row(t, "last token", st.FSM.LastToken)
		if st.Formation != "" {
			row(t, "formation", st.Formation)
		}
		for _, w := range st.Health.Warnings {
			row(t, "WARNING", w)
		}
	}); perr != nil {
		return perr
	}
	if notReady {
		return fmt.Errorf("not ready: %s", strings.Join(st.Health.Reasons, "; "))
	}
	return nil
}

func (e *env) members(ctx context.Context) error {
	var out struct {
		Members []admin.MemberJSON `json:"members"`
	}
	if err := e.c.call(ctx, "GET", "/v1/members", nil, &out, 0); err != nil {
		return err
	}
	return e.emit(out, func(t *tabwriter.Writer) {
		row(t, "ID", "ADDRESS", "GOSSIP", "STATE", "ROLE", "LEADER", "RAFT", "APPLIED", "LAG", "ERROR")
		for _, m := range out.Members {
			leader := ""
			if m.Leader {
				leader = "*"
			}
			applied := ""
			if m.Probed && m.Reachable {
				applied = strconv.FormatUint(m.AppliedIndex, 10)
			}
			row(t, m.ID, m.Addr, m.GossipAddr, m.State, m.Role, leader, m.RaftState, applied, m.Lag, m.ProbeError+m.Halted)
		}
	})
}

// locks lists a page of the locks (-limit, at most 1,000) from the first
// name after -after; the table's last row says how to ask for the next.
func (e *env) locks(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("locks", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	after := fs.String("after", "", "list the locks after this `name` (the next page)")
	limit := fs.Int("limit", 1000, "at most this many locks (1 to 1000)")
	if err := parseInterleaved(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 || *limit < 1 || *limit > 1000 {
		return fmt.Errorf("%w: locks [-after NAME] [-limit N] [PREFIX]", errUsage)
	}
	q := url.Values{"limit": {strconv.Itoa(*limit)}, "sync": {"1"}} // a linearizable view
	if fs.NArg() == 1 {
		q.Set("prefix", fs.Arg(0))
	}
	if *after != "" {
		q.Set("after", *after)
	}
	var out struct {
		Locks []admin.LockJSON `json:"locks"`
		Next  string           `json:"next,omitempty"`
	}
	if err := e.c.call(ctx, "GET", "/v1/locks?"+q.Encode(), nil, &out, 0); err != nil {
		return err
	}
	return e.emit(out, func(t *tabwriter.Writer) {
		row(t, "LOCK", "HOLDER", "SESSION", "TOKEN", "HELD FOR", "LEASE LEFT", "WAITERS", "NEXT")
		for _, l := range out.Locks {
			next := ""
			if len(l.Waiters) > 0 {
				next = fmt.Sprintf("#1 session %d %s", l.Waiters[0].Session, l.Waiters[0].Description)
			}
			switch {
			case l.Holder != nil:
				h := l.Holder
				row(t, l.Name, h.Description, h.Session, h.Token, ago(h.AcquiredAtUnixMS), ms(h.LeaseLeftMS), l.WaiterCount, next)
			case l.Limit > 0:
				row(t, l.Name, fmt.Sprintf("semaphore %d/%d permits", l.Used, l.Limit), "", "", "", "", l.WaiterCount, next)
				for _, h := range l.Shared {
					row(t, "  "+l.Name, h.Description, h.Session, h.Token, ago(h.AcquiredAtUnixMS), ms(h.LeaseLeftMS), "", fmt.Sprintf("%d permits", h.Permits))
				}
				if more := l.SharedCount - len(l.Shared); more > 0 {
					row(t, "  "+l.Name, fmt.Sprintf("(%d more holders)", more))
				}
			case len(l.Shared) > 0:
				row(t, l.Name, fmt.Sprintf("%d readers", l.SharedCount), "", "", "", "", l.WaiterCount, next)
			default:
				row(t, l.Name, "free", "", "", "", "", l.WaiterCount, next)
			}
		}
		if out.Next != "" {
			row(t, fmt.Sprintf("(more: raftlock locks -after %s)", strconv.Quote(out.Next)))
		}
	})
}

// sessions lists a page of the sessions (-limit, at most 1,000) from the
// first id after -after.
func (e *env) sessions(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sessions", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	after := fs.Uint64("after", 0, "list the sessions after this `id` (the next page)")
	limit := fs.Int("limit", 1000, "at most this many sessions (1 to 1000)")
	if err := parseInterleaved(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *limit < 1 || *limit > 1000 {
		return fmt.Errorf("%w: sessions [-after ID] [-limit N]", errUsage)
	}
	q := url.Values{"limit": {strconv.Itoa(*limit)}, "sync": {"1"}}
	if *after != 0 {
		q.Set("after", strconv.FormatUint(*after, 10))
	}
	var out struct {
		Sessions []admin.SessionJSON `json:"sessions"`
		Total    int                 `json:"total"`
		Next     uint64              `json:"next,omitempty"`
	}
	if err := e.c.call(ctx, "GET", "/v1/sessions?"+q.Encode(), nil, &out, 0); err != nil {
		return err
	}
	return e.emit(out, func(t *tabwriter.Writer) {
		row(t, "SESSION", "DESCRIPTION", "TTL", "LOCK DELAY", "CREATED", "LOCKS", "LEASE LEFT")
		for _, s := range out.Sessions {
			ttl, delay := s.TTLMS, s.LockDelayMS
			row(t, s.ID, s.Description, ms(&ttl), ms(&delay), ago(s.CreatedAtUnixMS), s.Locks, ms(s.LeaseLeftMS))
		}
		if out.Next != 0 {
			row(t, fmt.Sprintf("(%d sessions in all; more: raftlock sessions -after %d)", out.Total, out.Next))
		}
	})
}

// revoke: force-release NAME (its one grant, or -token-of N's: the
// exclusive holder, a reader or a semaphore's permit holder).
func (e *env) revoke(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("revoke", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	token := fs.Uint64("token-of", 0, "revoke only the grant with this fencing token: the holder, a reader or a permit holder (0: the lock's one grant)")
	why := fs.String("why", "", "reason, written into the log with who revoked it")
	if err := parseInterleaved(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: revoke [-token-of N] [-why TEXT] NAME", errUsage)
	}
	var out admin.RevokeResponse
	if err := e.c.call(ctx, "POST", "/v1/admin/revoke", admin.RevokeRequest{Lock: fs.Arg(0), Token: *token, Why: *why}, &out, 0); err != nil {
		return err
	}
	return e.emit(out, func(t *tabwriter.Writer) {
		row(t, "revoked", out.Lock)
		row(t, "grant", out.Kind)
		row(t, "holder", fmt.Sprintf("session %d %s", out.Holder.Session, out.Holder.Description))
		row(t, "token", out.Holder.Token)
		row(t, "log index", out.Index)
		row(t, "by", out.By)
	})
}

func (e *env) snapshot(ctx context.Context, args []string) error {
	if len(args) != 2 || (args[0] != "save" && args[0] != "restore") {
		return fmt.Errorf("%w: snapshot save FILE | snapshot restore FILE", errUsage)
	}
	file := args[1]
	if args[0] == "save" {
		var data []byte
		if err := e.c.call(ctx, "GET", "/v1/admin/snapshot", nil, &data, 5*time.Minute); err != nil {
			return err
		}
		if err := writeFileAtomic(file, data); err != nil {
			return err
		}
		out := map[string]any{"file": file, "bytes": len(data)}
		return e.emit(out, func(t *tabwriter.Writer) { row(t, "saved", fmt.Sprintf("%s (%d bytes)", file, len(data))) })
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	var out admin.RestoreResponse
	if err := e.c.call(ctx, "POST", "/v1/admin/snapshot", io.Reader(f), &out, 5*time.Minute); err != nil {
		return err
	}
	return e.emit(out, func(t *tabwriter.Writer) {
		row(t, "restored", file)
		row(t, "sessions / locks / held / waiters", fmt.Sprintf("%d / %d / %d / %d", out.Sessions, out.Locks, out.Held, out.Waiters))
		row(t, "last token", fmt.Sprintf("%d (the backup's: %d; tokens never go back)", out.LastToken, out.BackupLastToken))
	})
}

func (e *env) leader(ctx context.Context, args []string) error {
	if len(args) < 1 || len(args) > 2 || args[0] != "transfer" {
		return fmt.Errorf("%w: leader transfer [ID]", errUsage)
	}
	to := ""
	if len(args) == 2 {
		to = args[1]
	}
	var out struct {
		LeaderID string `json:"leader_id"`
	}
	if err := e.c.call(ctx, "POST", "/v1/admin/transfer-leadership", admin.TransferRequest{To: to}, &out, 30*time.Second); err != nil {
		return err
	}
	if to != "" && out.LeaderID != to {
		return fmt.Errorf("the leadership went to %q, not %q (an election intervened): try again", out.LeaderID, to)
	}
	return e.emit(out, func(t *tabwriter.Writer) { row(t, "leader", out.LeaderID) })
}

func (e *env) peer(ctx context.Context, args []string) error {
	if len(args) != 2 || args[0] != "remove" {
		return fmt.Errorf("%w: peer remove ID", errUsage)
	}
	var out map[string]any
	if err := e.c.call(ctx, "POST", "/v1/admin/remove-peer", admin.RemovePeerRequest{NodeID: args[1]}, &out, time.Minute); err != nil {
		return err
	}
	return e.emit(out, func(t *tabwriter.Writer) { row(t, "removed", args[1]) })
}

// parseInterleaved parses flags that may come before or after the
// positional arguments (revoke NAME -why x).
func parseInterleaved(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
