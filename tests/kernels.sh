#!/usr/bin/env bash
# make check's "kernels" suite: the module on Debian kernel series other than
# the main one (7.3). For each series in NVPM_OTHER_KSERIES (default 7.2):
# provisions its newest trixie-backports packages and a Rust-capable tree,
# as for 7.3 (scripts/provision.sh, cached), builds the module and the
# simulators against it, boots Debian's own image of it in QEMU and runs the
# load test and the client scenarios (01, 40-45). Ends with KERNELS-SUMMARY.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=tests/summary.sh
. tests/summary.sh
mkdir -p build/logs
pass=0 fail=0
for series in ${NVPM_OTHER_KSERIES:-7.2}; do
	echo "kernels: Debian $series"
	if ! KSERIES=$series scripts/provision.sh; then
		echo "  FAIL kernels/$series/provision: see the lines above"
		fail=$((fail + 1))
		continue
	fi
	log=build/logs/guest-$series.log
	# shellcheck disable=SC2016 # expanded inside the root
	NVPM_KERNEL_ENV=kernel-$series.env GUEST_SCENARIOS='[04][0-5]-*' GUEST_OUT=build/guest-$series \
		scripts/in-chroot.sh sh -c 'make --no-print-directory KDIR="$KDIR" KMAKE_FLAGS="$KMAKE_FLAGS" check-guest' 2>&1 |
		tee "$log"
	summary_add "$log" GUEST ||
		echo "  FAIL kernels/$series/build: the module or the simulators did not build for it (see $log)"
done
echo "KERNELS-SUMMARY $pass passed, $fail failed"
[ "$fail" = 0 ]
