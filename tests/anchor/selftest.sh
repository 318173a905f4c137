#!/bin/sh
# The anchor suite's own machinery, checked before its guests boot
# (tests/anchor/run.sh; tests/anchor/README.md): tests/guest/lib.sh's
# verdict on the checks tests/anchor/anchor-expected lists, and how
# client-lib.sh's load_stack passes the anchor's parameters. Runs the guest
# libraries in busybox sh (the guest's shell) where there is one, with
# dmesg, modprobe and nvpm-tool replaced by stand-ins and the results in a
# scratch file. Ends with "SELFTEST-SUMMARY N passed, N failed".
set -u
cd "$(dirname "$0")/../.." || exit 1
if [ -z "${SELFTEST_SHELL:-}" ] && command -v busybox >/dev/null 2>&1 && busybox sh -c : 2>/dev/null; then
	SELFTEST_SHELL="busybox sh" exec busybox sh "$0" "$@"
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bin"
# Stand-ins (functions: busybox sh runs its applets before PATH): the
# kernel log is $T/dmesg; modprobe records its arguments; nvpm-tool answers
# the GPU simulator's free_revoked from $T/free_revoked (default N), and 0
# to everything else (anchor_absorb's wait).
stand_ins() {
	dmesg() { cat "$T/dmesg"; }
	modprobe() { echo "$*" >>"$T/modprobe"; }
	rmmod() { :; }
	mark_dmesg() { :; }
	loaded() { return 1; }
}
cat >"$T/bin/nvpm-tool" <<EOF
#!/bin/sh
if [ "\$*" = "gpu get free_revoked" ]; then cat "$T/free_revoked" 2>/dev/null || echo N; else echo 0; fi
EOF
chmod +x "$T/bin/nvpm-tool"
PATH=$T/bin:$PATH
export PATH

ok=0 bad=0
check() { # NAME WANT-REGEX ACTUAL
	if printf '%s\n' "$3" | grep -qE -- "$2"; then
		ok=$((ok + 1))
		echo "  PASS $1"
	else
		bad=$((bad + 1))
		echo "  FAIL $1: '$3' does not match '$2'"
	fi
}

# One check of a scenario (SCENARIO, default 99-selftest) under a given
# expected file and kernel log; the verdict is the last result line lib.sh
# wrote (all of them in $T/results). Each runs in a subshell.
# verdict EXPECTED-FILE DMESG-FILE CHECK-CMD...
verdict() {
	cp "$2" "$T/dmesg"
	: >"$T/results"
	# shellcheck disable=SC2030 # the subshell's own
	(
		ANCHOR=1 ANCHOR_EXPECTED=$1 NVPM_RESULTS=$T/results SCENARIO=${SCENARIO:-99-selftest}
		. tests/guest/lib.sh
		stand_ins
		shift 2
		"$@"
	) >/dev/null 2>&1
	tail -n 1 "$T/results"
}

cat >"$T/expected" <<'EOF'
# A bug whose signal is a log line, and one with two signals.
signal sig-a	^.*the anchor: bug A here$
signal sig-b	driver: bug B \(#[0-9]+\)
signal sig-c	KASAN: use-after-free
99-selftest/a/*	bug-a	sig-a	^expected '0', got '1'$
99-selftest/bc	bug-bc	sig-b|sig-c	^expected '0', got '[0-9]+'$
99-selftest/undefined	bug-u	sig-nowhere	^expected '0', got '1'$
99-selftest/race	bug-r?	sig-a	^expected '0', got '1'$
EOF
mark='[  1.0] NVPM-MARK 99-selftest load'
printf '%s\n%s\n' "$mark" '[  1.1] the anchor: bug A here' >"$T/log-a"
printf '%s\n%s\n' '[  0.9] the anchor: bug A here' "$mark" >"$T/log-a-before-mark"
printf '%s\n%s\n' "$mark" '[  1.1] nothing to see' >"$T/log-none"
printf '%s\n%s\n' "$mark" '[  1.2] BUG: KASAN: use-after-free in x' >"$T/log-c"

check signal-shown '^NVPM-RESULT PASS 99-selftest/a/x \(anchor bug bug-a, failed as expected: .*; signal sig-a: the anchor: bug A here\)$' \
	"$(verdict "$T/expected" "$T/log-a" expect_eq a/x 0 1)"
check signal-absent-is-a-failure '^NVPM-RESULT FAIL 99-selftest/a/x anchor bug bug-a: failed as expected .*no kernel log line since the mark shows its signal \(sig-a\)$' \
	"$(verdict "$T/expected" "$T/log-none" expect_eq a/x 0 1)"
check signal-before-mark-is-a-failure '^NVPM-RESULT FAIL 99-selftest/a/x anchor bug bug-a: .*shows its signal' \
	"$(verdict "$T/expected" "$T/log-a-before-mark" expect_eq a/x 0 1)"
check second-signal-shown '^NVPM-RESULT PASS 99-selftest/bc \(anchor bug bug-bc, .*signal sig-c: BUG: KASAN' \
	"$(verdict "$T/expected" "$T/log-c" expect_eq bc 0 3)"
check other-bugs-signal-is-a-failure '^NVPM-RESULT FAIL 99-selftest/bc anchor bug bug-bc: .*shows its signal \(sig-b\|sig-c\)$' \
	"$(verdict "$T/expected" "$T/log-a" expect_eq bc 0 3)"
check undefined-signal-is-a-failure '^NVPM-RESULT FAIL 99-selftest/undefined anchor bug bug-u: .*shows its signal' \
	"$(verdict "$T/expected" "$T/log-a" expect_eq undefined 0 1)"
check other-message-is-a-failure "^NVPM-RESULT FAIL 99-selftest/a/x anchor bug bug-a expected \\('.*'\\), got: expected '0', got '2'$" \
	"$(verdict "$T/expected" "$T/log-a" expect_eq a/x 0 2)"
check expected-check-passing-is-a-failure '^NVPM-RESULT FAIL 99-selftest/a/x anchor bug bug-a expected here, but the check passed$' \
	"$(verdict "$T/expected" "$T/log-a" expect_eq a/x 0 0)"
check race-lost-passes '^NVPM-RESULT PASS 99-selftest/race \(anchor bug bug-r may show here; it did not\)$' \
	"$(verdict "$T/expected" "$T/log-none" expect_eq race 0 0)"
check race-won-shown '^NVPM-RESULT PASS 99-selftest/race \(anchor bug bug-r, failed as expected: .*; signal sig-a: ' \
	"$(verdict "$T/expected" "$T/log-a" expect_eq race 0 1)"
check race-without-signal-is-a-failure '^NVPM-RESULT FAIL 99-selftest/race anchor bug bug-r: .*shows its signal \(sig-a\)$' \
	"$(verdict "$T/expected" "$T/log-none" expect_eq race 0 1)"
check unlisted-failure '^NVPM-RESULT FAIL 99-selftest/other expected' \
	"$(verdict "$T/expected" "$T/log-a" expect_eq other 0 1)"
check unlisted-pass '^NVPM-RESULT PASS 99-selftest/other$' \
	"$(verdict "$T/expected" "$T/log-a" expect_eq other 0 0)"

# The anchor's stale read on a KASAN kernel (the real list): 43's
# no-stale-read, where the GPU simulator frees revoked tables for real,
# passes only when the failure is nv_dma_map's KASAN report, which lib.sh
# then lists to run.sh; without that report, or with another, it fails.
E=tests/anchor/anchor-expected
kasan='[   53.350467] BUG: KASAN: slab-use-after-free in nv_dma_map+0x1d5/0x6a0 [nvidia_peermem]'
mark43='[   52.0] NVPM-MARK 43-client-invalidation-race modern/free-before-dma_map'
printf '%s\n%s\n%s\n' "$mark43" "$kasan" '[   53.350470] Read of size 4 at addr ffff888004a1e204 by task nvpm-tool/301' >"$T/log-kasan"
printf '%s\n%s\n' "$mark43" '[   53.4] BUG: KASAN: slab-use-after-free in gsim_map_read_table+0x10/0x200 [nvidia]' >"$T/log-kasan-other"
printf '%s\n%s\n' "$kasan" "$mark43" >"$T/log-kasan-before-mark"
printf '%s\n' "$mark43" >"$T/log-kasan-none"
echo Y >"$T/free_revoked"
stale() { SCENARIO=43-client-invalidation-race verdict "$E" "$1" expect_no_kasan modern/free-before-dma_map/no-kasan-report; }
check kasan-report-shown '^NVPM-RESULT PASS 43-client-invalidation-race/modern/free-before-dma_map/no-kasan-report \(anchor bug freed-table, failed as expected: KASAN: slab-use-after-free in nv_dma_map\+.*; signal stale-table-read: BUG: KASAN: ' \
	"$(stale "$T/log-kasan")"
check kasan-report-listed-to-run-sh "^NVPM-KASAN-EXPECTED \\[   53\\.350467\\] BUG: KASAN: slab-use-after-free in nv_dma_map\\+0x1d5/0x6a0 \\[nvidia_peermem\\]\$" \
	"$(grep '^NVPM-KASAN' "$T/results")"
check kasan-report-absent-is-a-failure '^NVPM-RESULT FAIL 43-client-invalidation-race/modern/free-before-dma_map/no-kasan-report anchor bug freed-table expected here, but the check passed$' \
	"$(stale "$T/log-kasan-none")"
check kasan-report-before-mark-is-a-failure '^NVPM-RESULT FAIL 43-client-invalidation-race/modern/free-before-dma_map/no-kasan-report anchor bug freed-table expected here, but the check passed$' \
	"$(stale "$T/log-kasan-before-mark")"
check kasan-report-elsewhere-is-a-failure '^NVPM-RESULT FAIL 43-client-invalidation-race/modern/free-before-dma_map/no-kasan-report anchor bug freed-table expected .*got: KASAN: slab-use-after-free in gsim_map_read_table' \
	"$(stale "$T/log-kasan-other")"
check kasan-report-other-unlisted "^\$" "$(grep '^NVPM-KASAN' "$T/results")"
check kasan-message-without-report-is-a-failure '^NVPM-RESULT FAIL 43-client-invalidation-race/modern/free-before-dma_map/no-kasan-report anchor bug freed-table: failed as expected .*shows its signal \(stale-table-read\)$' \
	"$(SCENARIO=43-client-invalidation-race verdict "$E" "$T/log-kasan-none" fail modern/free-before-dma_map/no-kasan-report "${kasan#* BUG: }")"
echo N >"$T/free_revoked"
check no-check-without-free-revoked '^$' "$(stale "$T/log-kasan")"
check kasan-report-elsewhere-in-43-is-a-failure '^NVPM-RESULT FAIL 43-client-invalidation-race/modern/free-before-put_pages/no-kasan-report KASAN: slab-use-after-free in nv_dma_map' \
	"$(echo Y >"$T/free_revoked"; SCENARIO=43-client-invalidation-race verdict "$E" "$T/log-kasan" expect_no_kasan modern/free-before-put_pages/no-kasan-report)"

# tests/guest/log-scan.sh: a KASAN report counts unless the guest listed its
# first line on the results port; console copies of result lines do not
# count unless a kernel message cut into them.
res='NVPM-RESULT PASS 43-x/no-kasan-report (anchor bug freed-table, failed as expected: KASAN: slab-use-after-free in nv_dma_map+0x1d5/0x6a0 [nvidia_peermem]; signal stale-table-read: BUG: KASAN: slab-use-after-free in nv_dma_map+0x1d5/0x6a0 [nvidia_peermem])'
other='[   60.1] BUG: KASAN: slab-use-after-free in nv_dma_unmap+0x10/0x80 [nvidia_peermem]'
printf '%s\n' "$res" "NVPM-KASAN-EXPECTED $kasan" "NVPM-KASAN-EXPECTED [   61.0] WARNING: CPU: 0 PID: 1 at x" >"$T/scan-results"
scan() { printf '%s\n' "$@" >"$T/scan-log"; tests/guest/log-scan.sh "$T/scan-log" "$T/scan-results" 2>&1; }
check scan-expected-report-accepted '^$' "$(scan "$kasan" "$res" 'NVPM-DMESG-BEGIN' "$kasan")"
check scan-other-report-counts "^\\[   60\\.1\\] BUG: KASAN: slab-use-after-free in nv_dma_unmap" "$(scan "$kasan" "$other")"
check scan-report-unlisted-counts '^\[   53\.350467\] BUG: KASAN' "$(: >"$T/scan-results"; scan "$kasan")"
printf '%s\n' "$res" "NVPM-KASAN-EXPECTED [   61.0] WARNING: CPU: 0 PID: 1 at x" >"$T/scan-results"
check scan-only-kasan-lines-accepted '^\[   61\.0\] WARNING: CPU' "$(scan '[   61.0] WARNING: CPU: 0 PID: 1 at x')"
check scan-cut-result-line-counts '^NVPM-RESULT PASS 43-x' "$(scan "${res%)}[   62.0] BUG: KASAN: x)")"
check scan-result-copy-not-counted '^$' "$(scan "$res")"
check scan-modversions-refusal-not-counted '^$' "$(scan '[ 1.0] m: disagrees about version of symbol s' '[ 1.0] m: Unknown symbol s (err -22)')"
check scan-unknown-symbol-counts 'Unknown symbol s \(err -2\)' "$(scan '[ 1.0] m: Unknown symbol s (err -2)')"

# The real list: every entry has four fields and names only signals it
# defines, and each signal's regex is valid.
probs=$(awk -F'\t' '
	/^#/ || /^$/ { next }
	/^signal[ \t]/ { split($0, w, /[ \t]+/); def[w[2]] = 1; next }
	NF != 4 { printf "line %d has %d tab-separated fields; ", NR, NF; next }
	{ use[NR] = $3 }
	END { for (n in use) { k = split(use[n], s, "|"); for (i = 1; i <= k; i++) if (!(s[i] in def)) printf "line %d names undefined signal %s; ", n, s[i] } }' "$E")
check expected-file-well-formed '^$' "$probs"
bad_re=$(awk '/^signal[ \t]/ { sub(/^signal[ \t]+[^ \t]+[ \t]+/, ""); print }' "$E" | while IFS= read -r re; do
	echo x | grep -E -- "$re" >/dev/null 2>&1; [ $? -le 1 ] || printf '%s; ' "$re"; done)
check signal-regexes-valid '^$' "$bad_re"

# load_stack: the parameters the anchor gets. Each case: ANCHOR_PAS_PARAM,
# ANCHOR_PAS, the scenario's nvidia_peermem and GPU parameters; what
# modprobe nvidia_peermem and modprobe nvidia then got.
loads() { # PAS_PARAM PAS PEERMEM_PARAMS GPU_PARAMS
	: >"$T/modprobe"
	(
		ANCHOR=1 ANCHOR_PAS_PARAM=$1 ANCHOR_PAS=$2 GPU_PT_ABI=1.2 NVPM_RESULTS=$T/results SCENARIO=99-selftest
		[ -n "$2" ] || unset ANCHOR_PAS
		. tests/guest/lib.sh
		. tests/guest/client-lib.sh
		stand_ins
		load_stack t "mode=modern" "$4" "$3"
		echo "pas $(peermem_pas "$3")" >>"$T/modprobe"
	) >/dev/null 2>&1
	tr '\n' ';' <"$T/modprobe" | sed 's/  */ /g; s/ ;/;/g'
}
check load-550-drops-param '^mofed_peer_sim mode=modern;nvidia page_table_version=1\.2;nvidia_peermem peerdirect_support=1;pas 0;$' \
	"$(loads 0 "" "persistent_api_support=0 peerdirect_support=1" "")"
check load-560-passes-param-through '^mofed_peer_sim mode=modern;nvidia page_table_version=1\.2;nvidia_peermem persistent_api_support=0 peerdirect_support=1;pas 0;$' \
	"$(loads 1 1 "persistent_api_support=0 peerdirect_support=1" "")"
check load-560-suite-choice '^mofed_peer_sim mode=modern;nvidia page_table_version=1\.2;nvidia_peermem peerdirect_support=0 persistent_api_support=0;pas 0;$' \
	"$(loads 1 0 "peerdirect_support=0" "")"
check load-560-default '^mofed_peer_sim mode=modern;nvidia page_table_version=1\.2;nvidia_peermem( peerdirect_support=0)?;pas 1;$' \
	"$(loads 1 "" "peerdirect_support=0" "")"
check load-scenario-page-table-abi '^mofed_peer_sim mode=modern;nvidia page_table_version=2\.0;nvidia_peermem;pas 1;$' \
	"$(loads 1 "" "" "page_table_version=2.0")"

echo "selftest (${SELFTEST_SHELL:-sh}): $ok passed, $bad failed"
echo "SELFTEST-SUMMARY $ok passed, $bad failed"
[ "$bad" = 0 ]
