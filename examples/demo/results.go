//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
)

// results is what the demo found; written with -json.
type results struct {
	OK         bool   `json:"ok"`
	Short      bool   `json:"short"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`

	Cluster struct {
		FormedMS int64  `json:"formed_ms"`
		Leader   string `json:"leader"`
	} `json:"cluster"`

	Stale struct {
		Doc            string `json:"doc"`
		Holder         string `json:"holder"`     // the frozen replica
		NewHolder      string `json:"new_holder"` // the replica granted the lock meanwhile
		StaleToken     uint64 `json:"stale_token"`
		NewToken       uint64 `json:"new_token"`
		Highest        uint64 `json:"highest"` // highest token the fence had accepted
		Rejected       bool   `json:"rejected"`
		Accepted       bool   `json:"accepted"`
		Error          string `json:"error,omitempty"`
		FrozenMS       int64  `json:"frozen_ms"`
		TakeoverWaitMS int64  `json:"takeover_wait_ms"`
	} `json:"stale"`

	Failover struct {
		Killed           string `json:"killed"`
		NewLeader        string `json:"new_leader"`
		FailoverMS       int64  `json:"failover_ms"` // kill → next grant
		ProbeToken       uint64 `json:"probe_token"`
		SingletonFrom    string `json:"singleton_from"`
		SingletonTo      string `json:"singleton_to"`
		SingletonMoved   bool   `json:"singleton_moved"`
		SingletonMovedMS int64  `json:"singleton_moved_ms,omitempty"`
	} `json:"failover"`

	NoQuorum struct {
		Killed              string  `json:"killed"`
		Survivor            string  `json:"survivor"`
		TryLockStatus       int     `json:"trylock_status"`
		TryLockError        string  `json:"trylock_error"`
		TryLockMS           int64   `json:"trylock_ms"`
		LeaseEnded          bool    `json:"lease_ended"`
		LeaseEndedAfterMS   int64   `json:"lease_ended_after_ms"`
		LeaseError          string  `json:"lease_error,omitempty"`
		NoQuorumFromNS      int64   `json:"no_quorum_from_ns"` // first no_quorum answer
		NoQuorumToNS        int64   `json:"no_quorum_to_ns"`   // restart
		GrantsWithoutQuorum int     `json:"grants_without_quorum"`
		RenewalsOK          float64 `json:"renewals_ok"`     // keepalives that succeeded on the survivor after the first refusal
		RenewalsFailed      float64 `json:"renewals_failed"` // keepalives that failed there since the kill
		GrantsAfterRestart  int     `json:"grants_after_restart"`
		RecoveryMS          int64   `json:"recovery_ms"` // restart → next grant
		RecoveryToken       uint64  `json:"recovery_token"`
		SingletonBackMS     int64   `json:"singleton_back_ms"` // restart → the singleton runs again
	} `json:"no_quorum"`

	Totals struct {
		Grants           int      `json:"grants"`
		Locks            int      `json:"locks"`
		Published        int      `json:"published"`
		Rejected         int      `json:"rejected"`
		SingletonRows    int      `json:"singleton_rows"`
		SingletonRunners []string `json:"singleton_runners"`
	} `json:"totals"`

	Locks      []lockSummary `json:"locks"`
	Invariants []invariant   `json:"invariants"`

	grants []grantRecord
	pubs   []pubRow
	rejs   []pubRow
	runs   []pubRow
	// runsShown are the singleton's successive runs as replica#token, the
	// token as the narrator names it (Totals.SingletonRunners: in full).
	runsShown []string
}

type lockSummary struct {
	Lock       string `json:"lock"`
	Grants     int    `json:"grants"`
	FirstToken uint64 `json:"first_token"`
	LastToken  uint64 `json:"last_token"`
	Increasing bool   `json:"increasing"`
}

type invariant struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// pubRow is a row of publications, rejections or singleton_runs.
type pubRow struct {
	Seq     int64
	Doc     string
	Token   uint64
	Highest uint64
	Replica string
	AtNS    int64
}

func (r *results) allHeld() bool {
	if len(r.Invariants) == 0 {
		return false
	}
	for _, inv := range r.Invariants {
		if !inv.OK {
			return false
		}
	}
	return true
}

func (r *results) write(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// collect reads every replica's grant records and the database.
func (d *demo) collect(ctx context.Context) error {
	r := d.res
	files, _ := filepath.Glob(filepath.Join(d.dir, "*-grants.jsonl"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var g grantRecord
			if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
				continue // a line cut by SIGKILL cannot happen (one write each), but be lenient
			}
			r.grants = append(r.grants, g)
		}
		fh.Close()
	}
	r.grants = append(r.grants, d.grants...)
	db, err := d.store.open()
	if err != nil {
		return err
	}
	defer db.Close()
	query := func(q string, scan func(*pubRow) []any) ([]pubRow, error) {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []pubRow
		for rows.Next() {
			var p pubRow
			if err := rows.Scan(scan(&p)...); err != nil {
				return nil, err
			}
			out = append(out, p)
		}
		return out, rows.Err()
	}
	if r.pubs, err = query(`SELECT seq, doc, token, replica, at_ns FROM publications ORDER BY seq`,
		func(p *pubRow) []any { return []any{&p.Seq, &p.Doc, &p.Token, &p.Replica, &p.AtNS} }); err != nil {
		return err
	}
	if r.rejs, err = query(`SELECT seq, doc, token, highest, replica, at_ns FROM rejections ORDER BY seq`,
		func(p *pubRow) []any { return []any{&p.Seq, &p.Doc, &p.Token, &p.Highest, &p.Replica, &p.AtNS} }); err != nil {
		return err
	}
	if r.runs, err = query(`SELECT seq, token, replica, at_ns FROM singleton_runs ORDER BY seq`,
		func(p *pubRow) []any { return []any{&p.Seq, &p.Token, &p.Replica, &p.AtNS} }); err != nil {
		return err
	}
	return nil
}

// check computes the totals and the invariant checks; their details show
// tokens as tn names them (the results' token fields have them in full).
func (r *results) check(tn *tokenNames) {
	add := func(name string, ok bool, format string, args ...any) {
		r.Invariants = append(r.Invariants, invariant{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
	tk := func(t uint64) string { s, _ := tn.name(t); return s }

	// Tokens strictly increase per lock, in the order the grants happened
	// (each grant is recorded by its receiver as soon as it is returned).
	byLock := map[string][]grantRecord{}
	for _, g := range r.grants {
		byLock[g.Lock] = append(byLock[g.Lock], g)
	}
	var bad []string
	r.Locks = nil
	for name, gs := range byLock {
		sort.SliceStable(gs, func(i, j int) bool { return gs[i].AtNS < gs[j].AtNS })
		ok := true
		for i := 1; i < len(gs); i++ {
			if gs[i].Token <= gs[i-1].Token {
				ok = false
				bad = append(bad, fmt.Sprintf("%s: %s (%s) after %s (%s)", name, tk(gs[i].Token), gs[i].Replica, tk(gs[i-1].Token), gs[i-1].Replica))
			}
		}
		r.Locks = append(r.Locks, lockSummary{Lock: name, Grants: len(gs), FirstToken: gs[0].Token, LastToken: gs[len(gs)-1].Token, Increasing: ok})
	}
	slices.SortFunc(r.Locks, func(a, b lockSummary) int { return compareLockNames(a.Lock, b.Lock) })
	r.Totals.Grants, r.Totals.Locks = len(r.grants), len(byLock)
	add("tokens strictly increase per lock", len(bad) == 0 && len(r.grants) > 0,
		"%d grants of %d locks from every replica%s", len(r.grants), len(byLock), listBad(bad))

	// Every token is granted once (the grant counter is cluster-wide).
	seen := map[uint64]grantRecord{}
	bad = nil
	for _, g := range r.grants {
		if o, dup := seen[g.Token]; dup {
			bad = append(bad, fmt.Sprintf("token %s: %s@%s and %s@%s", tk(g.Token), o.Lock, o.Replica, g.Lock, g.Replica))
		}
		seen[g.Token] = g
	}
	add("every token granted once", len(bad) == 0, "%d distinct tokens%s", len(seen), listBad(bad))

	// Accepted writes never go back in token order, per document, and each
	// carries a token that was granted for that document.
	last := map[string]uint64{}
	bad = nil
	unknown := 0
	for _, p := range r.pubs {
		if p.Token < last[p.Doc] {
			bad = append(bad, fmt.Sprintf("%s: token %s accepted after %s", p.Doc, tk(p.Token), tk(last[p.Doc])))
		}
		last[p.Doc] = max(last[p.Doc], p.Token)
		if g, ok := seen[p.Token]; !ok || g.Lock != p.Doc {
			unknown++
		}
	}
	r.Totals.Published, r.Totals.Rejected = len(r.pubs), len(r.rejs)
	add("accepted writes never go back", len(bad) == 0 && len(r.pubs) > 0, "%d writes to %d documents, in commit order%s", len(r.pubs), len(last), listBad(bad))
	add("every accepted write carried a token granted for its document", unknown == 0 && len(r.pubs) > 0, "%d writes without a matching grant", unknown)

	// The stale write was rejected (and nothing else was).
	add("the frozen holder's stale write was rejected", r.Stale.Rejected && !r.Stale.Accepted && len(r.rejs) >= 1,
		"%s token %s < %s; stale writes rejected in all: %d", r.Stale.Doc, tk(r.Stale.StaleToken), tk(r.Stale.Highest), len(r.rejs))

	// The singleton: one runner per token, tokens never go back.
	runner := map[uint64]string{}
	var lastTok uint64
	bad = nil
	var runners []string
	for _, p := range r.runs {
		if o, ok := runner[p.Token]; ok && o != p.Replica {
			bad = append(bad, fmt.Sprintf("token %s written by %s and %s", tk(p.Token), o, p.Replica))
		}
		runner[p.Token] = p.Replica
		if p.Token < lastTok {
			bad = append(bad, fmt.Sprintf("token %s after %s", tk(p.Token), tk(lastTok)))
		}
		lastTok = max(lastTok, p.Token)
		if run := fmt.Sprintf("%s#%d", p.Replica, p.Token); len(runners) == 0 || runners[len(runners)-1] != run {
			runners = append(runners, run)
			r.runsShown = append(r.runsShown, p.Replica+"#"+tk(p.Token))
		}
	}
	r.Totals.SingletonRows, r.Totals.SingletonRunners = len(r.runs), runners
	add("singleton: one runner at a time", len(bad) == 0 && len(r.runs) > 0,
		"%d rows by %d successive runs (replica#token: %s)%s", len(r.runs), len(runner), strings.Join(r.runsShown, " → "), listBad(bad))

	// Failover.
	f := r.Failover
	add("failover: a new leader granted locks", f.NewLeader != "" && f.NewLeader != f.Killed && f.ProbeToken > 0,
		"%s killed, %s leads, first grant after %dms", f.Killed, f.NewLeader, f.FailoverMS)
	add("failover: the singleton left the dead leader", f.SingletonFrom != f.Killed || (f.SingletonMoved && f.SingletonTo != f.Killed),
		"%s → %s", f.SingletonFrom, f.SingletonTo)

	// No grants without a quorum; grants again after the restart.
	q := &r.NoQuorum
	q.GrantsWithoutQuorum, q.GrantsAfterRestart = 0, 0
	for _, g := range r.grants {
		switch {
		case g.AtNS >= q.NoQuorumFromNS && g.AtNS <= q.NoQuorumToNS:
			q.GrantsWithoutQuorum++
		case g.AtNS > q.NoQuorumToNS:
			q.GrantsAfterRestart++
		}
	}
	add("no quorum: TryLock refused with no_quorum", q.TryLockError == "no_quorum" && q.TryLockStatus == 503, "HTTP %d %s", q.TryLockStatus, q.TryLockError)
	add("no quorum: no grants", q.NoQuorumFromNS > 0 && q.GrantsWithoutQuorum == 0,
		"%d grants between the first refusal and the restart", q.GrantsWithoutQuorum)
	add("no quorum: no renewals", q.NoQuorumFromNS > 0 && q.RenewalsOK == 0 && q.RenewalsFailed > 0,
		"on %s: %g keepalives succeeded after the first refusal, %g failed since the kill", q.Survivor, q.RenewalsOK, q.RenewalsFailed)
	add("no quorum: the held lease ended", q.LeaseEnded, "after %dms: %s", q.LeaseEndedAfterMS, shorten(q.LeaseError, 100))
	add("recovery: grants resumed", q.RecoveryToken > 0 && q.GrantsAfterRestart > 0,
		"%d grants after the restart, the first after %dms", q.GrantsAfterRestart, q.RecoveryMS)
}

func listBad(bad []string) string {
	if len(bad) == 0 {
		return ""
	}
	if len(bad) > 3 {
		bad = append(bad[:3], fmt.Sprintf("… %d more", len(bad)-3))
	}
	return "; VIOLATIONS: " + strings.Join(bad, "; ")
}

// compareLockNames sorts doc:2 before doc:10.
func compareLockNames(a, b string) int {
	pa, na, oka := splitNum(a)
	pb, nb, okb := splitNum(b)
	if oka && okb && pa == pb {
		return na - nb
	}
	return strings.Compare(a, b)
}

func splitNum(s string) (string, int, bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s, 0, false
	}
	var n int
	if _, err := fmt.Sscanf(s[i+1:], "%d", &n); err != nil {
		return s, 0, false
	}
	return s[:i], n, true
}

func (r *results) summaryTable(tn *tokenNames) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	f, q, s := r.Failover, r.NoQuorum, r.Stale
	fmt.Fprintf(tw, "grants (all replicas)\t%d\tof %d locks\n", r.Totals.Grants, r.Totals.Locks)
	fmt.Fprintf(tw, "documents published\t%d\taccepted by the fence\n", r.Totals.Published)
	stale, _ := tn.name(s.StaleToken)
	highest, _ := tn.name(s.Highest)
	fmt.Fprintf(tw, "stale writes rejected\t%d\t%s: token %s < %s (%s frozen %.1fs)\n", r.Totals.Rejected, s.Doc, stale, highest, s.Holder, float64(s.FrozenMS)/1000)
	fmt.Fprintf(tw, "failover\t%.2fs\tkill of leader %s → next grant; new leader %s\n", float64(f.FailoverMS)/1000, f.Killed, f.NewLeader)
	if f.SingletonMoved {
		fmt.Fprintf(tw, "singleton moved\t%.2fs\t%s → %s\n", float64(f.SingletonMovedMS)/1000, f.SingletonFrom, f.SingletonTo)
	} else {
		fmt.Fprintf(tw, "singleton\tstayed\ton %s\n", f.SingletonTo)
	}
	fmt.Fprintf(tw, "singleton runs\t%d rows\t%s\n", r.Totals.SingletonRows, strings.Join(r.runsShown, " → "))
	fmt.Fprintf(tw, "without quorum\t%d grants\tTryLock → %d %s; lease ended after %.1fs\n", q.GrantsWithoutQuorum, q.TryLockStatus, q.TryLockError, float64(q.LeaseEndedAfterMS)/1000)
	fmt.Fprintf(tw, "recovery\t%.2fs\trestart → next grant; %d grants since; singleton back after %.1fs\n", float64(q.RecoveryMS)/1000, q.GrantsAfterRestart, float64(q.SingletonBackMS)/1000)
	tw.Flush()
	return b.String()
}

// locksTable lists the grants of each lock, tokens shown as tn names them
// (the JSON results have them in full).
func (r *results) locksTable(tn *tokenNames) string {
	w := len("lock")
	for _, l := range r.Locks {
		w = max(w, len(l.Lock))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %6s  %11s  %10s  %s\n", w, "lock", "grants", "first token", "last token", "strictly increasing")
	for _, l := range r.Locks {
		inc := "yes"
		if !l.Increasing {
			inc = "NO"
		}
		first, _ := tn.name(l.FirstToken)
		last, _ := tn.name(l.LastToken)
		fmt.Fprintf(&b, "%-*s  %6d  %11s  %10s  %s\n", w, l.Lock, l.Grants, first, last, inc)
	}
	return b.String()
}

// dbCounts summarises the database so far (for step 1).
type dbCounts struct {
	published        int
	perReplica       map[string]int
	maxToken         uint64
	singletonRows    int
	singletonRunners []string
}

func (c dbCounts) byReplica() string {
	var ids []string
	for id := range c.perReplica {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var parts []string
	for _, id := range ids {
		parts = append(parts, fmt.Sprintf("%s %d", id, c.perReplica[id]))
	}
	return strings.Join(parts, ", ")
}

func (d *demo) dbCounts(ctx context.Context) (dbCounts, error) {
	c := dbCounts{perReplica: map[string]int{}}
	db, err := d.store.open()
	if err != nil {
		return c, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT replica, COUNT(*), MAX(token) FROM publications GROUP BY replica`)
	if err != nil {
		return c, err
	}
	for rows.Next() {
		var id string
		var n int
		var mx uint64
		if err := rows.Scan(&id, &n, &mx); err != nil {
			rows.Close()
			return c, err
		}
		c.perReplica[id], c.published, c.maxToken = n, c.published+n, max(c.maxToken, mx)
	}
	rows.Close()
	rows, err = db.QueryContext(ctx, `SELECT DISTINCT replica FROM singleton_runs ORDER BY replica`)
	if err != nil {
		return c, err
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		c.singletonRunners = append(c.singletonRunners, id)
	}
	rows.Close()
	err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM singleton_runs`).Scan(&c.singletonRows)
	return c, err
}

// document returns a document's published content.
func (d *demo) document(ctx context.Context, id string) (string, error) {
	db, err := d.store.open()
	if err != nil {
		return "", err
	}
	defer db.Close()
	var content string
	err = db.QueryRowContext(ctx, d.store.q(`SELECT content FROM documents WHERE id = ?`), id).Scan(&content)
	return content, err
}
