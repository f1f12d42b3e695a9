#!/usr/bin/env bash
# .ci/gotest.sh: runs README's test command (`go test -race ./...`) and, if it
# fails, ends with a digest of each failing package (its failed tests, panics,
# fatal errors, data races, signals), so that the end of the log says why.
#
# One narrow exception: a package whose test binary crashed inside the race
# runtime itself (a signal or a ThreadSanitizer CHECK, no test reported
# failed; such crashes of the race detector with testing/synctest are an open
# Go issue) is run once more, verbosely; the step passes only if that rerun
# passes, and the log says so. A failed test, panic, data race or timeout is
# never retried.
set -uo pipefail
out=$(mktemp)
go test -race ./... 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] && { rm -f "$out"; exit 0; }

# block PKG: the output go test printed for PKG (buffered per package).
block() {
	awk -v pkg="$1" '
		/^(ok|FAIL|\?)[ \t]+[^ \t]+[ \t]/ { if ($2 == pkg && $1 == "FAIL") { printf "%s", buf; print }; buf = ""; next }
		{ buf = buf $0 "\n" }' "$out"
}
failed=$(awk '/^FAIL[ \t]+[^ \t]+[ \t]/ { print $2 }' "$out" | sort -u | tr "\n" " ")
echo
echo "== test digest (rc $rc): failing packages: ${failed:-none reported (build failure?)}"
still=0
for p in $failed; do
	b=$(block "$p")
	echo "-- $p"
	grep -E -- '--- FAIL|^panic:|fatal error|^SIG[A-Z]+:|signal SIG|ThreadSanitizer|WARNING: DATA RACE|_test\.go:[0-9]+:|test timed out|^\[build failed\]' <<<"$b" | head -40
	if grep -qE -- '--- FAIL|^panic:|WARNING: DATA RACE|test timed out' <<<"$b" || ! grep -qE 'ThreadSanitizer|^SIG(SEGV|BUS|ABRT):|signal SIG(SEGV|BUS)' <<<"$b"; then
		still=1
		continue
	fi
	echo "   $p crashed in the race runtime with no failed test: running it once more"
	rerun=$(mktemp)
	if go test -race -count=1 -v "$p" >"$rerun" 2>&1; then
		echo "   rerun of $p passed ($(grep -c -- '--- PASS' "$rerun") tests)"
	else
		grep -E -- '--- FAIL|^panic:|fatal error|^SIG[A-Z]+:|ThreadSanitizer|WARNING: DATA RACE|_test\.go:[0-9]+:' "$rerun" | head -40
		echo "   rerun of $p failed too"
		still=1
	fi
	rm -f "$rerun"
done
[ -z "$failed" ] && still=1
rm -f "$out"
exit $still
