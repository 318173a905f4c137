#!/usr/bin/env bash
# The `anchor` suite (make check-anchor, part of make check): NVIDIA's own
# nvidia-peermem (tests/anchor/build.sh) as the module under test, through
# every scenario of what the RDMA core and the driver see
# (tests/anchor/README.md). Runs inside the trixie root (repo at /src) after `make sims`.
#
# Each group of scenarios boots a guest of its own, bounded by GUEST_TIMEOUT,
# so that a guest the anchor hangs or crashes spoils only its group: the
# suite still runs the others and reports. In the guest, ANCHOR=1 makes the
# scenarios skip checks of this project's own features (own_feature) and
# expect the failures tests/anchor/anchor-expected lists, each the mark of
# one of the anchor's known bugs, shown by that bug's own signal. Before the
# guests, tests/anchor/selftest.sh checks that machinery.
#
# Env: ANCHOR_GROUPS (default all but stale-read, names below); ANCHOR_OUT
# (default build/anchor; make check-anchor-debug: build/anchor-debug);
# ANCHOR_PERSISTENT_API_SUPPORT
# (0 or 1; an anchor of 560 or later only: its value wherever a scenario
# loads the module without naming one, default the module's own, 1);
# ANCHOR_VERSION (tests/anchor/build.sh); GUEST_TIMEOUT per boot
# (default 900), ANCHOR_DEADLOCK_MS (the GPU simulator's deadlock_ms, default
# 1000: how long the mid core's deadlock of bug 2696789 takes to be called
# one), STRESS_* as for the guest suite (STRESS_CONC_OPS default 30000 here:
# the anchor's mid-core deadlocks cost deadlock_ms each).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
SUITE=anchor SUMMARY=ANCHOR
# shellcheck source=tests/lib/check.sh
. tests/lib/check.sh
OUT=${ANCHOR_OUT:-build/anchor}
export ANCHOR_OUT=$OUT # tests/anchor/build.sh
t0=$SECONDS
mkdir -p "$OUT"
echo "=== anchor/selftest: tests/anchor/selftest.sh"
tests/anchor/selftest.sh >"$OUT/selftest.log" 2>&1
grep -E '^  FAIL' "$OUT/selftest.log" | sed 's/^/  /'
if summary_add "$OUT/selftest.log" SELFTEST; then
	echo "  anchor/selftest: $summary_pass passed, $summary_fail failed (log $OUT/selftest.log)"
else
	echo "  anchor/selftest: no summary, counted as 1 failure; see $OUT/selftest.log"
fi
tests/anchor/build.sh || { bad build "tests/anchor/build.sh failed"; finish; }
# shellcheck source=/dev/null
. "$OUT/anchor.env"
# The anchor's layout where a scenario names none: 550 has one (this
# module's persistent_api_support=0); 560 and later default to 1.
pas=${ANCHOR_PERSISTENT_API_SUPPORT:-}
if [ "$ANCHOR_PAS_PARAM" = 1 ]; then
	case $pas in '' | 0 | 1) ;; *) echo "anchor: ANCHOR_PERSISTENT_API_SUPPORT must be 0 or 1"; exit 1 ;; esac
	layout=${pas:-1}
else
	[ -z "$pas" ] || { echo "anchor: nvidia-peermem $ANCHOR_VERSION has no persistent_api_support"; exit 1; }
	layout=0
fi

# name:scenario globs (space-separated)
groups=(
	"load:01-load"
	"clients:40-* 41-* 42-* 43-* 45-*"
	"badinput:50-* 51-*"
	"faults:52-* 53-*"
	"concurrent:55-*"
)
# Run only when named (make check-anchor-debug, on the KASAN kernel): 43,
# where nv_dma_map reads the table the driver freed (bug freed-table).
named_groups=("stale-read:43-*")
# The configurations with invalidation (persistent_api_support=0 named):
# the anchor has no fallback client. Its default layout, where it has the
# persistent nv_mem (560+, persistent_api_support=1), adds the persistent
# ones; otherwise they would load the same revocable layout again.
stress_configs=modern-revocable,mid-revocable,legacy-revocable
[ "$layout" = 0 ] || stress_configs=modern-persistent,mid-persistent,legacy-persistent,$stress_configs
for g in "${groups[@]}" "${named_groups[@]}"; do
	name=${g%%:*}
	case " ${ANCHOR_GROUPS:-${groups[*]%%:*}} " in *" $name "*) ;; *) continue ;; esac
	echo "=== anchor/$name: ${g#*:}"
	t1=$SECONDS
	GUEST_PEERMEM_KO=$OUT/nvidia_peermem.ko GUEST_EXPECTED_VERSION=$ANCHOR_VERSION \
		GUEST_ENV="ANCHOR=1 ANCHOR_PAS_PARAM=$ANCHOR_PAS_PARAM ${pas:+ANCHOR_PAS=$pas} GPU_PT_ABI=$ANCHOR_PT_ABI \
GPU_DEADLOCK_MS=${ANCHOR_DEADLOCK_MS:-1000} STRESS_CONFIGS=${STRESS_CONFIGS:-$stress_configs} \
STRESS_CONC_OPS=${STRESS_CONC_OPS:-30000} ${STRESS_RANDOM_OPS:+STRESS_RANDOM_OPS=$STRESS_RANDOM_OPS} ${STRESS_SEED:+STRESS_SEED=$STRESS_SEED}" \
		GUEST_OUT=$OUT/$name GUEST_FILES=tests/anchor/anchor-expected GUEST_SCENARIOS="${g#*:}" \
		GUEST_TIMEOUT=${GUEST_TIMEOUT:-900} GUEST_EXTRA_KO="$(echo tests/sim/*.ko)" \
		tests/guest/run.sh >"$OUT/$name.log" 2>&1
	grep -E '^  FAIL|^guest: [0-9]+ check|anchor bug' "$OUT/$name.log" | sed 's/^/  /'
	if ! summary_add "$OUT/$name.log" GUEST; then
		echo "  anchor/$name: no summary (the run broke), counted as 1 failure; see $OUT/$name.log"
		continue
	fi
	echo "  anchor/$name: $summary_pass passed, $summary_fail failed in $((SECONDS - t1)) s (log $OUT/$name.log)"
	# stale-read exists to show freed-table by KASAN: in each core's stage,
	# so a simulator that stopped freeing for real (no check) fails here.
	if [ "$name" = stale-read ]; then
		shown=$(grep -cE '^  PASS 43-client-invalidation-race/(modern|mid|legacy)/free-before-dma_map/no-kasan-report \(anchor bug freed-table, ' "$OUT/$name.log")
		if [ "$shown" = 3 ]; then
			ok stale-read/shown
		else
			bad stale-read/shown "nv_dma_map's KASAN report shown in $shown of 3 cores (free_revoked off? no KASAN?)"
		fi
	fi
done
echo "anchor: nvidia-peermem $ANCHOR_VERSION ($ANCHOR_ORIGIN), layout persistent_api_support=$layout$([ "$ANCHOR_PAS_PARAM" = 1 ] || echo ' (its only one)'), page tables $ANCHOR_PT_ABI, $((SECONDS - t0)) s"
finish
