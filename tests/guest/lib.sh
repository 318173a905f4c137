# Assertions for guest scenarios (busybox sh). Each prints one result line
# that tests/guest/run.sh counts.
# shellcheck shell=sh

# report LINE: to the console and to the results port (init), where no
# kernel message can cut into it.
report() {
	echo "$*"
	echo "$*" >>"${NVPM_RESULTS:-/dev/null}"
}
pass() { report "NVPM-RESULT PASS $SCENARIO/$1"; }
fail() { report "NVPM-RESULT FAIL $SCENARIO/$1 $2"; }

# expect_eq NAME EXPECTED ACTUAL
expect_eq() {
	if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "expected '$2', got '$3'"; fi
}

# expect_ok NAME CMD...: the command succeeds.
expect_ok() {
	n=$1; shift
	if out=$("$@" 2>&1); then pass "$n"; else fail "$n" "'$*' failed: $out"; fi
}

# expect_fail NAME CMD...: the command fails.
expect_fail() {
	n=$1; shift
	if out=$("$@" 2>&1); then fail "$n" "'$*' succeeded: $out"; else pass "$n"; fi
}

# expect_dmesg NAME PATTERN: the kernel log has a line matching PATTERN after
# the latest mark (mark_dmesg), not one an earlier step wrote.
expect_dmesg() {
	if dmesg_since_mark | grep -qE "$2"; then pass "$1"; else fail "$1" "no dmesg line since the mark matches '$2'"; fi
}

# mark_dmesg LABEL: expect_dmesg looks only at kernel log lines after this
# (init marks the start of each scenario; load_stack marks each load).
mark_dmesg() { echo "NVPM-MARK $SCENARIO $1" >/dev/kmsg; }

# dmesg_since_mark: the kernel log after the latest mark.
dmesg_since_mark() {
	dmesg | awk '/NVPM-MARK / { n = 0; next } { line[n++] = $0 } END { for (i = 0; i < n; i++) print line[i] }'
}

loaded() { [ -d "/sys/module/$1" ]; }

# expect_counter NAME gpu|core COUNTER VALUE: a simulator counter (tests/sim).
expect_counter() {
	expect_eq "$1" "$4" "$(nvpm-tool "$2" counter "$3" 2>&1)"
}

# expect_match NAME REGEX ACTUAL: ACTUAL matches the extended regular expression.
expect_match() {
	if printf '%s\n' "$3" | grep -qE "$2"; then pass "$1"; else fail "$1" "'$3' does not match '$2'"; fi
}

# sim_unload: unloads the simulators (tests/sim) left loaded by an earlier
# scenario, so that a scenario loads them with its own parameters.
sim_unload() {
	for m in peer_test_client mofed_peer_sim nvidia; do
		! loaded "$m" || rmmod "$m" || fail "unload-$m" "$m cannot be unloaded"
	done
}
