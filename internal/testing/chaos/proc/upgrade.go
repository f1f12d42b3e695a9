package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The upgrade class runs a rolling upgrade from the previous release: the
// replicas start as examples/replica built at PreviousRelease (from a git
// worktree of the repository in a temporary directory), and the nemesis
// replaces them one at a time with the current build, on their data dirs,
// while the workload runs. Until the library versions its entries, both
// builds are expected to agree; afterwards this is where a mixed-version
// cluster would diverge or stop.

// PreviousRelease is the commit the upgrade class starts from.
const PreviousRelease = "46baeb2"

// buildAt builds examples/replica at commit into dir (via a temporary git
// worktree of root's repository) and returns the binary.
func buildAt(ctx context.Context, root, commit, dir string, race bool) (string, error) {
	wt, err := os.MkdirTemp("", "raftlock-chaos-old-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(wt)
	src := filepath.Join(wt, "src")
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	add := exec.CommandContext(cctx, "git", "-C", root, "worktree", "add", "--detach", src, commit)
	if out, err := add.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git worktree add %s: %v: %s", commit, err, strings.TrimSpace(string(out)))
	}
	defer exec.Command("git", "-C", root, "worktree", "remove", "--force", src).Run()
	out := filepath.Join(dir, "at-"+commit) // not dir itself: the current build lives there
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	bin, err := buildReplica(ctx, src, out, race)
	if err != nil {
		return "", fmt.Errorf("build at %s: %w", commit, err)
	}
	return bin, nil
}

// upgradeNemesis replaces every replica, in a random order, with the
// current build while the workload runs; between the steps the usual
// faults (pauses, kills) continue. A replica that does not come back ready
// on the new build is a violation (probe).
func (x *Harness) upgradeNemesis(ctx context.Context) {
	order := x.rng.Perm(x.o.Replicas)
	step := x.o.Duration / time.Duration(x.o.Replicas+1)
	for _, i := range order {
		x.sleep(ctx, step/2+time.Duration(x.rng.Int64N(int64(step/2))))
		if ctx.Err() != nil {
			return
		}
		done := x.fault("upgrade", x.reps[i].id)
		x.stopReplica(i, syscall.SIGTERM)
		x.reps[i].bin = x.o.Bin
		x.restart(i)
		x.probe(ctx, "upgraded "+x.reps[i].id+" serves", i, fmt.Sprintf("probe-upgrade-%s", x.reps[i].id), 30*time.Second, false)
		done()
		if x.rng.IntN(2) == 0 {
			x.mixedStep(ctx, x.rng.IntN(60))
		}
	}
	x.sleep(ctx, time.Until(x.end))
}
