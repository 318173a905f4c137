# Shared helpers of the test suites (sourced; bash). A suite sets SUITE (the
# prefix of its result names, e.g. "neighbours") and SUMMARY (the summary
# line's name, e.g. "NEIGHBOURS"), then uses:
#   ok NAME / bad NAME WHY     one result
#   check NAME CMD...          one result: the command's exit status (its
#                              output's last lines shown on failure)
#   expect_rc NAME RC CMD...   one result: the command exits with RC
#   tool_results CMD...        a tool's own "PASS name" and "FAIL name: why"
#                              lines, indented and counted
#   step TEXT                  a progress line with the seconds so far
#   finish                     the "<SUMMARY>-SUMMARY N passed, N failed" line;
#                              exits 0 when nothing failed
#   summary_add LOG [NAME]     adds a sub-run's summary line (tests/lib/summary.sh)
# shellcheck shell=bash
# shellcheck source=tests/lib/summary.sh
. "$(dirname "${BASH_SOURCE[0]}")/summary.sh"
pass=0 fail=0 T0=$SECONDS
ok() {
	echo "  PASS $SUITE/$1"
	pass=$((pass + 1))
}
bad() {
	echo "  FAIL $SUITE/$1: $2" | head -n 25
	fail=$((fail + 1))
}
check() {
	local n=$1 out
	shift
	if out=$("$@" 2>&1); then ok "$n"; else bad "$n" "$(printf '%s\n' "$out" | tail -n 20)"; fi
}
expect_rc() {
	local n=$1 want=$2 out rc
	shift 2
	out=$("$@" 2>&1)
	rc=$?
	if [ "$rc" = "$want" ]; then ok "$n"; else bad "$n" "exit $rc, expected $want: $out"; fi
}
tool_results() {
	local out
	out=$("$@" 2>&1)
	printf '%s\n' "$out" | sed 's/^/  /'
	pass=$((pass + $(grep -c '^PASS ' <<<"$out"))) fail=$((fail + $(grep -c '^FAIL ' <<<"$out")))
}
step() { printf '[%4ds] %s%s\n' "$((SECONDS - T0))" "$*" "${NVPM_CHECK_SINCE:+ (make check: $((EPOCHSECONDS - NVPM_CHECK_SINCE)) s; ${NVPM_CHECK_TIMES:-})}"; }
finish() {
	step "done"
	echo "$SUMMARY-SUMMARY $pass passed, $fail failed"
	[ "$fail" = 0 ]
	exit
}
