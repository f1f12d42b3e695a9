#!/usr/bin/env bash
# Runs one fault class and seed of the chaos harness against the code at a
# git commit, in a temporary git worktree, and prints the verdict: which
# checkers failed (the bug was caught) or "passed".
#
#   bash internal/testing/chaos/proof.sh <commit> <class> <seed> [repeats]
#   bash internal/testing/chaos/proof.sh --overlay <commit> <class> <seed> [repeats]
#
# <class> is an in-process class (mixed, amnesia, clock, clusters, disk,
# flow, formation, membership, operator, restart) or proc:<class> for a
# multi-process class (proc:mixed, proc:network, proc:disk, proc:restart,
# proc:upgrade; needs root for namespaces and tmpfs). With repeats > 1 the
# seed runs that many times and the script reports how often the verdict
# repeated.
# --overlay copies this tree's harness (internal/testing/chaos, internal/testing/memnet,
# internal/testing/clustertest) over the worktree first: to run today's harness
# against older library code (it must still compile against that code's
# API; before paged listings the harness reads the table in one call) —
# for a class added after the bug it is there to catch.
#
# Exit status: 0 when every repeat passed, 1 when a checker failed, 2 on a
# usage or setup error.
set -euo pipefail
here="$(cd "$(dirname "$0")/../../.." && pwd)"
export PATH="/usr/local/go/bin:${PATH}"

overlay=0
if [ "${1:-}" = "--overlay" ]; then overlay=1; shift; fi
if [ $# -lt 3 ]; then
	sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
fi
commit="$1" class="$2" seed="$3" repeats="${4:-1}"

tmp="$(mktemp -d /tmp/raftlock-proof-XXXXXX)"
wt="$tmp/wt"
cleanup() {
	git -C "$here" worktree remove --force "$wt" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
git -C "$here" worktree add --detach "$wt" "$commit" >/dev/null 2>&1 || { echo "proof: cannot check out $commit"; exit 2; }
if [ $overlay = 1 ]; then
	for d in internal/testing/chaos internal/testing/memnet internal/testing/clustertest; do
		rm -rf "${wt:?}/$d"
		cp -r "$here/$d" "$wt/$d"
	done
	rm -rf "$wt/internal/testing/chaos/results" "$wt/internal/testing/chaos/"zz_*_test.go
	# Code before paged listings (1c10f1d) lists the whole table in one
	# call, each lock with all its grants and waiters: the harness reads
	# it so there (wholeTable; the end-state test's first page).
	if ! grep -q 'func (f \*FSM) Locks(prefix, after string' "$wt"/fsm/*.go; then
		cat >"$wt/internal/testing/chaos/inproc_table_test.go" <<'GO'
package chaos

import "github.com/raftlock/raftlock/fsm"

// wholeTable reads every lock of t (proof.sh: code before paged listings).
func wholeTable(t interface {
	Locks(prefix string, limit int) []fsm.LockInfo
}) ([]fsm.LockInfo, error) {
	return t.Locks("", 0), nil
}
GO
		sed -i 's/left, _ := c.Nodes\[0\].Locks("", "", 0)/left := c.Nodes[0].Locks("", 0)/; s/li\.SharedCount/len(li.Shared)/; s/li\.WaiterCount/len(li.Waiters)/' \
			"$wt/internal/testing/chaos/check_primitives_test.go"
	fi
fi
rev="$(git -C "$wt" rev-parse --short HEAD)"
cd "$wt"
log="$tmp/run.log"
case "$class" in
proc:*)
	status=0 caught=0
	for k in $(seq 1 "$repeats"); do
		if RAFTLOCK_CHAOS_PROC=1 RAFTLOCK_CHAOS_PROC_CLASS="${class#proc:}" RAFTLOCK_CHAOS_PROC_SEED="$seed" \
			RAFTLOCK_CHAOS_PROC_RUNS=1 RAFTLOCK_CHAOS_ARTIFACTS="$tmp/artifacts" \
			go test -count=1 -timeout 30m -v -run 'TestMultiProcess$' ./internal/testing/chaos/proc/ >>"$log" 2>&1; then :; else
			status=1 caught=$((caught + 1))
		fi
	done
	[ "$repeats" -gt 1 ] && echo "  replays of proc class ${class#proc:} seed $seed: failed in $caught of $repeats" >>"$log"
	;;
*)
	RAFTLOCK_CHAOS_CLASSES="$class" RAFTLOCK_CHAOS_SEED="$seed" RAFTLOCK_CHAOS_SEEDS=1 RAFTLOCK_CHAOS_REPEAT="$repeats" \
	RAFTLOCK_CHAOS_ARTIFACTS="$tmp/artifacts" TMPDIR=/dev/shm \
		go test -count=1 -timeout 30m -v -run 'TestInProcessChaos$' ./internal/testing/chaos/ >"$log" 2>&1 && status=0 || status=1
	;;
esac
echo "commit $rev, class $class, seed $seed, repeats $repeats"
if grep -q "violated checks" "$log"; then
	grep -o "violated checks map\[[^]]*\]" "$log" | sort | uniq -c | sed 's/^/  /'
fi
grep -E "replays of (proc )?class|fault schedule identical" "$log" | sed 's/^ *//; s/^[a-z_]*\.go:[0-9]*: /  /' || true
if [ $status = 0 ]; then
	echo "verdict: passed"
elif grep -q "violated checks" "$log"; then
	echo "verdict: caught"
else
	echo "verdict: the run itself failed (see below)"
	tail -30 "$log"
	exit 2
fi
exit $status
