# The last line of a suite or a guest run: "<NAME>-SUMMARY N passed, N failed".
# Sourced by tests/run-all.sh, tests/kernels/run.sh, tests/arm64/run.sh, tests/anchor/run.sh and
# tests/packaging/run.sh.
# shellcheck shell=bash

# summary_add LOG [NAME]: adds the counts of LOG's last such line (NAME:
# GUEST, HOST, ...; default any) to the caller's pass and fail, and leaves
# them in summary_pass and summary_fail. A LOG without one (the run broke
# before reporting) counts as one failure: exit 1, for the caller to say why.
summary_add() {
	local line
	line=$(grep -E "^${2:-[A-Z-]+}-SUMMARY [0-9]+ passed, [0-9]+ failed" "$1" 2>/dev/null | tail -n1)
	if [ -z "$line" ]; then
		fail=$((fail + 1))
		return 1
	fi
	read -r summary_pass summary_fail <<<"$(sed -E 's/.*-SUMMARY ([0-9]+) passed, ([0-9]+) failed.*/\1 \2/' <<<"$line")"
	pass=$((pass + summary_pass)) fail=$((fail + summary_fail))
}
