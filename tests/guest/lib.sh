# Assertions for guest scenarios (busybox sh). Each prints one result line
# that tests/guest/run.sh counts.
# shellcheck shell=sh

# GUEST_ENV words (tests/guest/run.sh): ANCHOR=1 in the anchor suite.
# shellcheck disable=SC1091
[ ! -r /tests/env ] || . /tests/env

# report LINE: to the console and to the results port (init), where no
# kernel message can cut into it. Each result line is also counted in
# /tmp/nvpm-reported, whose total init sends last: run.sh fails a run that
# received fewer.
report() {
	echo "$*"
	echo "$*" >>"${NVPM_RESULTS:-/dev/null}"
	case $* in NVPM-RESULT\ *) echo >>/tmp/nvpm-reported ;; esac
}

# The anchor suite (tests/anchor/run.sh, ANCHOR=1) runs NVIDIA's own
# nvidia-peermem as the module under test. /tests/anchor-expected
# (ANCHOR_EXPECTED) lists the checks it fails because of a bug of its own
# (tests/anchor/README.md): "CHECK-GLOB BUG SIGNALS MESSAGE-REGEX" per
# line, and "signal NAME REGEX" lines. Such a check must fail, with a message
# matching the regex, and one of its SIGNALS ('|'-separated names) must show:
# a kernel log line after the latest mark (the anchor's, the driver's, a
# KASAN report) matching that signal's regex. It then reports PASS (the bug
# shown as expected); a pass, another failure or a failure without the bug's
# signal reports FAIL. A BUG ending in "?" is a race the bug may lose: the
# check may then also pass. A KASAN report shown so is accepted by run.sh
# (anchor_kasan_accept); any other fails the run.
ANCHOR_EXPECTED=${ANCHOR_EXPECTED:-/tests/anchor-expected}
anchor_expected() { # NAME: prints "BUG SIGNALS REGEX" of the first line matching, if any
	[ "${ANCHOR:-0}" = 1 ] && [ -r "$ANCHOR_EXPECTED" ] || return 1
	while read -r ae_glob ae_bug ae_sig ae_re; do
		case $ae_glob in '#'* | '' | signal) continue ;; esac
		# shellcheck disable=SC2254 # the glob is the pattern
		case $SCENARIO/$1 in $ae_glob)
			echo "$ae_bug $ae_sig $ae_re"
			return 0
			;;
		esac
	done <"$ANCHOR_EXPECTED"
	return 1
}
# anchor_signal_re NAME: the regex of signal NAME (empty if undefined).
anchor_signal_re() {
	awk -v n="$1" '$1 == "signal" && $2 == n { sub(/^signal[ \t]+[^ \t]+[ \t]+/, ""); print; exit }' "$ANCHOR_EXPECTED"
}
# anchor_signal SIGNALS: prints the first kernel log line since the latest
# mark that shows one of SIGNALS; false when none does.
anchor_signal() {
	as_rest="$1|"
	while [ -n "$as_rest" ]; do
		as_name=${as_rest%%|*}
		as_rest=${as_rest#*|}
		as_re=$(anchor_signal_re "$as_name")
		[ -n "$as_re" ] || continue
		as_line=$(dmesg_since_mark | grep -E -- "$as_re" | head -n 1)
		[ -n "$as_line" ] || continue
		printf '%s: %s\n' "$as_name" "$(printf '%s' "$as_line" | sed 's/^\[[ 0-9.]*\] //' | cut -c1-160)"
		return 0
	done
	return 1
}
# anchor_kasan_accept SIGNALS: after an expected failure was shown, lists on
# the results port (not the console) each KASAN report since the mark whose
# first line shows one of SIGNALS: NVPM-KASAN-EXPECTED and that line as
# dmesg prints it, which tests/guest/log-scan.sh then does not count.
anchor_kasan_accept() {
	ak_rest="$1|"
	while [ -n "$ak_rest" ]; do
		ak_re=$(anchor_signal_re "${ak_rest%%|*}")
		ak_rest=${ak_rest#*|}
		[ -n "$ak_re" ] || continue
		dmesg_since_mark | grep -E -- "$ak_re" | grep -F 'BUG: KASAN: ' |
			sed 's/^/NVPM-KASAN-EXPECTED /' >>"${NVPM_RESULTS:-/dev/null}"
	done
	return 0
}
pass() {
	if ae=$(anchor_expected "$1"); then
		case ${ae%% *} in
		*'?') report "NVPM-RESULT PASS $SCENARIO/$1 (anchor bug ${ae%%\?*} may show here; it did not)" ;;
		*) report "NVPM-RESULT FAIL $SCENARIO/$1 anchor bug ${ae%% *} expected here, but the check passed" ;;
		esac
	else
		report "NVPM-RESULT PASS $SCENARIO/$1"
	fi
}
fail() {
	if ae=$(anchor_expected "$1"); then
		f_bug=${ae%% *} f_rest=${ae#* }
		f_bug=${f_bug%\?}
		f_sig=${f_rest%% *} f_re=${f_rest#* }
		if ! printf '%s\n' "$2" | grep -qE -- "$f_re"; then
			report "NVPM-RESULT FAIL $SCENARIO/$1 anchor bug $f_bug expected ('$f_re'), got: $2"
		elif ! f_shown=$(anchor_signal "$f_sig"); then
			report "NVPM-RESULT FAIL $SCENARIO/$1 anchor bug $f_bug: failed as expected ($2), but no kernel log line since the mark shows its signal ($f_sig)"
		else
			anchor_kasan_accept "$f_sig"
			report "NVPM-RESULT PASS $SCENARIO/$1 (anchor bug $f_bug, failed as expected: $2; signal $f_shown)"
			anchor_absorb
		fi
	else
		report "NVPM-RESULT FAIL $SCENARIO/$1 $2"
	fi
}

# anchor_absorb: after an anchor bug was shown as expected, lets what it
# set off finish (a cudaFree whose callback the bug held up: up to 15 s) and
# zeroes the simulators' violation counters, so that the later checks of the
# same stack see only what happens after it, not the same bug again.
anchor_absorb() {
	aa_n=0
	while aa_v=$(nvpm-tool gpu counter frees.running 2>/dev/null) && [ "$aa_v" != 0 ] && [ $aa_n -lt 150 ]; do
		sleep 0.1
		aa_n=$((aa_n + 1))
	done
	nvpm-tool gpu reset --violations >/dev/null 2>&1
	nvpm-tool core reset --violations >/dev/null 2>&1
	return 0
}

# skip NAME WHY: a check that does not apply (counted apart by run.sh).
skip() { report "NVPM-RESULT SKIP $SCENARIO/$1 $2"; }

# pas_param [NAME]: true when the module under test has
# persistent_api_support: this project's, or an anchor of 560 or later
# (ANCHOR_PAS_PARAM=1). Otherwise NAME, if given, is reported as skipped.
pas_param() {
	[ "${ANCHOR:-0}" != 1 ] || [ "${ANCHOR_PAS_PARAM:-0}" = 1 ] && return 0
	[ -z "${1:-}" ] || skip "$1" "this anchor has no persistent_api_support (NVIDIA's came in 560)"
	return 1
}

# peermem_params PARAMS: the parameters a scenario's PARAMS for
# nvidia_peermem become for the module under test. The anchor without
# persistent_api_support (550) has one layout, this module's
# persistent_api_support=0: the parameter is dropped. With it (560+), where
# PARAMS name none, the anchor suite's choice (ANCHOR_PAS) is added.
peermem_params() {
	if [ "${ANCHOR:-0}" != 1 ]; then
		echo "$1"
	elif ! pas_param ""; then
		echo "$1" | sed 's/persistent_api_support=[^ ]*//g'
	else
		case " $1 " in
		*" persistent_api_support="*) echo "$1" ;;
		*) echo "$1${ANCHOR_PAS:+ persistent_api_support=$ANCHOR_PAS}" ;;
		esac
	fi
}

# peermem_pas PARAMS: the persistent_api_support the module under test runs
# with when loaded with PARAMS (0: the anchor without the parameter).
peermem_pas() {
	pp_v=$(peermem_params "$1" | tr ' ' '\n' | sed -n 's/^persistent_api_support=//p' | tail -n1)
	if [ -n "$pp_v" ]; then echo "$pp_v"; elif pas_param ""; then echo 1; else echo 0; fi
}

# own_feature: true when the module under test is this project's (not the
# anchor). Checks of this module's own design or features (one pin per
# registration, coalesced SGEs, its statistics, the fallback client, its log
# lines, persistent_api_support) run only then:
#   if own_feature NAME; then expect_... NAME ...; fi
# For the anchor, NAME is reported as skipped.
own_feature() {
	[ "${ANCHOR:-0}" = 1 ] || return 0
	[ -z "${1:-}" ] || skip "$1" "a feature of this project's module, not of the anchor"
	return 1
}

# expect_eq NAME EXPECTED ACTUAL
expect_eq() {
	if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "expected '$2', got '$3'"; fi
}

# expect_ok NAME CMD...: the command succeeds.
expect_ok() {
	eo_n=$1; shift
	if out=$("$@" 2>&1); then pass "$eo_n"; else fail "$eo_n" "'$*' failed: $out"; fi
}

# expect_fail NAME CMD...: the command fails.
expect_fail() {
	ef_n=$1; shift
	if out=$("$@" 2>&1); then fail "$ef_n" "'$*' succeeded: $out"; else pass "$ef_n"; fi
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

# expect_no_kasan NAME: no KASAN report since the latest mark. Only where
# the GPU simulator frees the tables the driver frees for real
# (free_revoked: on by default on a KASAN kernel), where a client's read of
# one is such a report naming the reader. Elsewhere no check (none could fail).
expect_no_kasan() {
	[ "$(nvpm-tool gpu get free_revoked 2>/dev/null)" = Y ] || return 0
	ns_line=$(dmesg_since_mark | grep -F 'BUG: KASAN: ' | head -n 1 | sed 's/^\[[ 0-9.]*\] //')
	if [ -z "$ns_line" ]; then pass "$1"; else fail "$1" "${ns_line#BUG: }"; fi
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
