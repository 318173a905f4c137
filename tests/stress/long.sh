#!/usr/bin/env bash
# `make stress-long` (runs inside the trixie root, repo at /src, like
# tests/guest/run.sh): the stress suite at a large scale, outside make check.
# One guest boot per configuration, so that a module that cannot be unloaded
# any more (a leaked context) spoils only its own configuration, plus one for
# the configuration-independent scenarios. Ends with
# "STRESS-LONG-SUMMARY N passed, N failed" and the total duration.
#
# Env: STRESS_LONG_ENV (KEY=VALUE words for the scenarios, see
# tests/stress/README.md), STRESS_SEED (default: the clock), STRESS_CONFIGS (default:
# all), GUEST_TIMEOUT per boot (default 7200 s); the guest runner's.
set -uo pipefail
cd "$(dirname "$0")/../.."
seed=${STRESS_SEED:-$(date +%s)}
configs=${STRESS_CONFIGS:-modern-persistent modern-revocable modern-fallback mid-persistent mid-revocable legacy-persistent legacy-revocable}
export GUEST_TIMEOUT=${GUEST_TIMEOUT:-7200}
pass=0 fail=0 t0=$SECONDS
echo "stress-long: seed $seed, ${STRESS_LONG_ENV:-}"

# boot NAME SCENARIO_GLOB ENV...: one guest; adds its summary to the totals.
boot() {
	local name=$1 glob=$2 out=build/stress-long/$1 line t1=$SECONDS
	shift 2
	echo "=== stress-long: $name"
	GUEST_OUT=$out GUEST_SCENARIOS=$glob GUEST_ENV="STRESS_SEED=$seed ${STRESS_LONG_ENV:-} $*" \
		tests/guest/run.sh 2>&1 | grep -vE '^  PASS ' | tee "$out.log"
	line=$(grep -E '^GUEST-SUMMARY' "$out.log" | tail -n1)
	if [ -z "$line" ]; then
		fail=$((fail + 1))
	else
		pass=$((pass + $(echo "$line" | sed 's/.*SUMMARY \([0-9]*\) passed.*/\1/')))
		fail=$((fail + $(echo "$line" | sed 's/.* \([0-9]*\) failed.*/\1/')))
	fi
	echo "=== stress-long: $name in $((SECONDS - t1)) s"
}

mkdir -p build/stress-long
boot fixed '5[01]-stress-*'
for cfg in $configs; do
	boot "$cfg" '5[2-5]-stress-*' "STRESS_CONFIGS=$cfg"
done
echo "=== stress-long: $((SECONDS - t0)) s in all, seed $seed"
echo "STRESS-LONG-SUMMARY $pass passed, $fail failed"
[ "$fail" = 0 ]
