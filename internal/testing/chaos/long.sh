#!/usr/bin/env bash
# The long chaos run: many in-process seeds of every fault class, several
# multi-process runs of every multi-process class (race-built replicas, 3
# and 5 of them), the lease model's checks at their deep bounds
# (internal/testing/model/lease) and every fuzz target for a bounded time. Writes
# internal/testing/chaos/results/latest-{inprocess,multiprocess,fuzz}.{json,md},
# latest-model.md
# (with figures per fault class) and latest.md (the tables; the only one of
# them that is committed, see results/.gitignore). Run from
# anywhere; as root for partitions (network namespaces + nftables) and the
# disk class (tmpfs).
#
#   bash internal/testing/chaos/long.sh          # or: bash .ci/run --chaos-long
#
# Knobs (environment): CHAOS_CLASSES (all), CHAOS_SEEDS (112 per class: ≥
# 1,000 in all), CHAOS_DURATION (each class's default, fake time),
# CHAOS_PROC_CLASSES (all), CHAOS_PROC_RUNS (2 per class), CHAOS_PROC_DURATION
# (60s), CHAOS_FUZZTIME (20s per target), CHAOS_OUT (internal/testing/chaos/results).
set -euo pipefail
cd "$(dirname "$0")/../../.."
export PATH="/usr/local/go/bin:${PATH}"

out="${CHAOS_OUT:-internal/testing/chaos/results}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
artifacts="$out/failures"
status=0
start=$(date +%s)

echo "== chaos (long): in-process, ${CHAOS_SEEDS:-112} seeds per class (${CHAOS_CLASSES:-all classes}), ${CHAOS_DURATION:-each class default} fake time"
t0=$(date +%s)
RAFTLOCK_CHAOS_CLASSES="${CHAOS_CLASSES:-all}" RAFTLOCK_CHAOS_SEEDS="${CHAOS_SEEDS:-112}" RAFTLOCK_CHAOS_DURATION="${CHAOS_DURATION:-}" \
RAFTLOCK_CHAOS_OUT="$out" RAFTLOCK_CHAOS_ARTIFACTS="$artifacts" \
	go test -count=1 -timeout 180m -run 'TestInProcessChaos$' ./internal/testing/chaos/ >"$out/inprocess.log" 2>&1 || status=1
grep -E '^\s+--- FAIL|violated checks' "$out/inprocess.log" | head -50 || true
echo "   in-process: $(( $(date +%s) - t0 )) s"

echo "== chaos (long): multi-process, ${CHAOS_PROC_RUNS:-2} runs per class (${CHAOS_PROC_CLASSES:-all}) x ${CHAOS_PROC_DURATION:-60s}"
if ! command -v nft >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	timeout 180 sh -c 'apt-get update -qq && apt-get install -y -qq nftables iproute2 >/dev/null' \
		|| echo "   (nftables not installed: the run goes without partitions and says so)"
fi
t0=$(date +%s)
RAFTLOCK_CHAOS_PROC=1 RAFTLOCK_CHAOS_PROC_CLASS="${CHAOS_PROC_CLASSES:-all}" RAFTLOCK_CHAOS_PROC_RUNS="${CHAOS_PROC_RUNS:-2}" \
RAFTLOCK_CHAOS_PROC_DURATION="${CHAOS_PROC_DURATION:-60s}" RAFTLOCK_CHAOS_PROC_RACE=1 \
RAFTLOCK_CHAOS_OUT="$out" RAFTLOCK_CHAOS_ARTIFACTS="$artifacts" \
	go test -count=1 -timeout 120m -v -run 'TestMultiProcess$' ./internal/testing/chaos/proc/ >"$out/multiprocess.log" 2>&1 || status=1
grep -E '^\s+--- |violated checks' "$out/multiprocess.log" | head -50 || true
echo "   multi-process: $(( $(date +%s) - t0 )) s"

echo "== lease model (long): the deep bounds (RAFTLOCK_MODEL_DEEP=1)"
t0=$(date +%s)
model_md="$out/latest-model.md"
RAFTLOCK_MODEL_DEEP=1 go test -count=1 -timeout 120m -v -run 'TestCatalogue$|TestBoundsAreReached$' ./internal/testing/model/lease/ >"$out/model.log" 2>&1 || status=1
{
	printf '| lease model check | states (time) | expected | result |\n|---|---|---|---|\n'
	sed -nE 's/^ +catalogue_test.go:[0-9]+: ([^:]+): ([0-9]+) states, depth [0-9]+, ([^;]+); ([^;]+);.*/| \1 | \2 (\3) | \4 |/p' "$out/model.log" |
		while IFS= read -r row; do
			name=$(cut -d'|' -f2 <<<"$row" | xargs)
			if grep -qE -- "--- FAIL: TestCatalogue/${name}( |$)" "$out/model.log"; then
				echo "${row} FAIL |"
			else
				echo "${row} as expected |"
			fi
		done
} >"$model_md"
grep -E '^\s+--- FAIL|scale [0-9]+:' "$out/model.log" | head -20 || true
echo "   lease model: $(( $(date +%s) - t0 )) s"

echo "== fuzz (long): every target for ${CHAOS_FUZZTIME:-20s}"
fuzz_json="$out/latest-fuzz.json"
fuzz_md="$out/latest-fuzz.md"
printf '| fuzz target | result |\n|---|---|\n' >"$fuzz_md"
echo '[' >"$fuzz_json"
first=1
while IFS=: read -r file _ decl; do
	pkg="./$(dirname "$file")"
	name=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/' <<<"$decl")
	# -fuzzminimizetime 0: minimizing a new interesting input can outlast a
	# short -fuzztime, and go test then fails the target with "context
	# deadline exceeded" though no input failed (FuzzRestore did so once);
	# a failing input is still saved, unminimized.
	corpus="$pkg/testdata/fuzz/$name"
	inputs() { if [ -d "$corpus" ]; then find "$corpus" -type f | wc -l; else echo 0; fi; }
	inputs_before=$(inputs)
	fuzz() { go test -run '^$' -fuzz "^${name}\$" -fuzztime "${CHAOS_FUZZTIME:-20s}" -fuzzminimizetime 0 "$pkg" >"$out/fuzz-$name.log" 2>&1; }
	# Go's fuzz coordinator can also fail a target with "context deadline
	# exceeded" at the -fuzztime boundary having found nothing (a race on
	# its own deadline, golang/go#75804, fixed in Go 1.27): such a failure,
	# with no input written, is run once more; a failing input never is.
	if fuzz; then
		result=ok
	elif [ "$(inputs)" = "$inputs_before" ] &&
		grep -q '^    context deadline exceeded$' "$out/fuzz-$name.log"; then
		echo "   $pkg $name: 'context deadline exceeded' and no input written: once more (golang/go#75804)"
		mv "$out/fuzz-$name.log" "$out/fuzz-$name.first.log"
		if fuzz; then
			result="ok (second run; the first: golang/go#75804)"
		else
			result=FAIL
		fi
	else
		result=FAIL
	fi
	if [ "$result" = FAIL ]; then
		status=1
		echo "   $pkg $name: FAIL (see $out/fuzz-$name.log and $pkg/testdata/fuzz/$name)"
	else
		rm -f "$out/fuzz-$name.log"
	fi
	echo "   $pkg $name: $result"
	printf '| %s %s | %s |\n' "$pkg" "$name" "$result" >>"$fuzz_md"
	[ $first = 1 ] || echo ',' >>"$fuzz_json"
	first=0
	printf '{"package":"%s","target":"%s","fuzztime":"%s","result":"%s"}' "$pkg" "$name" "${CHAOS_FUZZTIME:-20s}" "$result" >>"$fuzz_json"
done < <(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . | grep -v '^./bench/' | sed 's|^\./||' | sort)
echo ']' >>"$fuzz_json"

{
	echo "# Chaos results ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(( $(date +%s) - start )) s)"
	echo
	for f in latest-inprocess.md latest-multiprocess.md latest-model.md latest-fuzz.md; do
		[ -f "$out/$f" ] && { cat "$out/$f"; echo; }
	done
} >"$out/latest.md"
cat "$out/latest.md"
exit $status
