# The last line of a suite or a guest run: "<NAME>-SUMMARY N passed, N failed".
# Sourced by tests/run-all.sh, tests/kernels.sh, tests/anchor/run.sh and
# tests/packaging/run.sh.
# shellcheck shell=bash

# summary_counts LOG [NAME]: prints "PASSED FAILED" from the last such line
# of LOG (NAME: GUEST, HOST, ...; default any); exit 1 if LOG has none (the
# run broke before reporting).
summary_counts() {
	local line
	line=$(grep -E "^${2:-[A-Z-]+}-SUMMARY [0-9]+ passed, [0-9]+ failed" "$1" 2>/dev/null | tail -n1)
	[ -n "$line" ] || return 1
	sed -E 's/.*-SUMMARY ([0-9]+) passed, ([0-9]+) failed.*/\1 \2/' <<<"$line"
}
