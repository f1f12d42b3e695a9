package proc

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "modernc.org/sqlite"

	"github.com/raftlock/raftlock/internal/testing/chaos"
)

// ---- the end: convergence, logs, digests ----

func (x *Harness) finish(ctx context.Context) error {
	if err := x.waitReady(ctx, 90*time.Second); err != nil {
		return fmt.Errorf("after healing: %w", err)
	}
	// Wait until every replica has applied the same index (nothing is
	// proposed any more but expiries and session closes of the past).
	var common uint64
	deadline := time.Now().Add(60 * time.Second)
	for {
		var idx []uint64
		same := true
		for i := range x.reps {
			st, err := x.status(ctx, i)
			if err != nil {
				same = false
				break
			}
			idx = append(idx, st.AppliedIndex)
			same = same && st.AppliedIndex == idx[0] && st.CommitIndex == st.AppliedIndex
		}
		if same && len(idx) == len(x.reps) {
			common = idx[0]
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replicas did not reach a common applied index: %v", idx)
		}
		x.sleep(ctx, 300*time.Millisecond)
	}
	x.logf("converged at index %d", common)
	var stops sync.WaitGroup
	for _, r := range x.reps {
		stops.Add(1)
		go func() {
			defer stops.Done()
			r.stop(syscall.SIGTERM, 15*time.Second)
		}()
	}
	stops.Wait()
	x.logf("replicas stopped")
	for _, r := range x.reps {
		for _, p := range scanLog(r.logPath) {
			if x.o.Class == "disk" && strings.Contains(p, "no space left on device") {
				// hashicorp/raft panics when it cannot persist its term: a
				// replica with a full disk stops (and is restarted once freed).
				x.h.Notes = append(x.h.Notes, fmt.Sprintf("%s stopped on a full disk: %s", r.id, p))
				continue
			}
			x.h.HarnessErrors = append(x.h.HarnessErrors, fmt.Sprintf("%s log: %s", r.id, p))
		}
	}
	// The resource's final state.
	rows, err := x.db.QueryContext(ctx, `SELECT resource, token, value FROM writes ORDER BY id`)
	if err != nil {
		return err
	}
	x.h.Final = map[string][]chaos.Version{}
	for rows.Next() {
		var res, val string
		var tok int64
		if err := rows.Scan(&res, &tok, &val); err != nil {
			rows.Close()
			return err
		}
		x.h.Final[res] = append(x.h.Final[res], chaos.Version{Token: uint64(tok), Value: val})
	}
	rows.Close()

	// The committed log, read back from every replica's data dir.
	var logs []*chaos.ReplicaLog
	for _, r := range x.reps {
		rl, err := chaos.ReadReplicaLog(r.id, r.dataDir)
		if err != nil {
			return err
		}
		logs = append(logs, rl)
		at := now()
		x.h.Configs = append(x.h.Configs, rl.Configurations(at)...)
		x.h.AddEntries(rl.EntrySamples(at))
		if ds, err := rl.DigestSamples(common, at); err == nil {
			x.h.AddSamples(ds)
		}
		x.h.Expect.Members = append(x.h.Expect.Members, r.id)
		if x.h.Expect.Addrs == nil {
			x.h.Expect.Addrs = map[string]string{}
		}
		x.h.Expect.Addrs[r.id] = r.raftAddr()
	}
	x.h.LogDivergence = chaos.CompareLogs(logs, common)
	x.h.Expect.ExactlyOnce = x.o.Class != "upgrade" // formed by this release
	for i, rl := range logs {
		events, d, last, complete, err := rl.Replay(common)
		if err != nil {
			return err
		}
		x.h.Digests = append(x.h.Digests, d)
		if i == 0 || (complete && len(events) > len(x.h.Log)) {
			x.h.Log, x.h.LogTokens = events, last
			if !complete {
				x.h.LogTokens = 0 // a snapshot hid the first grants
			}
		}
	}
	return nil
}
