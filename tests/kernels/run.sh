#!/usr/bin/env bash
# make check's "kernels" suite: the module on Debian kernels other than the
# main one (7.3), each booted from Debian's own image in QEMU with Debian's
# ib_core and the simulators built for it.
# - NVPM_OTHER_KSERIES (default 7.2): kernels with Rust, provisioned like 7.3
#   (scripts/provision.sh, a Rust-capable tree), the module in kernel mode:
#   the load test and the client scenarios (01, 02, 40-45).
# - NVPM_CARRIED_KSERIES (default 6.12 6.1): Debian 13's and Debian 12's
#   default kernels, built without Rust: their headers packages as a host has
#   them (scripts/provision-carried.sh), provisioned here; the packaging suite
#   installs them in its root, where DKMS builds the module in carried mode,
#   and boots that module (tests/packaging/run.sh). Here: the static check's
#   own test on 6.12 and the build's choice of mode (tests/kernels/kbuild-checks.sh).
# - NVPM_MAKE_KSERIES (default 5.10): Debian 11's kernel, without Rust,
#   whose headers name a compiler the roots lack: built with make in carried
#   mode, booted for the load test and the client scenarios (01, 02, 40-45).
# - NVPM_ARM64_CARRIED_KSERIES (default 6.12): Debian 13's arm64 kernel,
#   without Rust: cross-built with make in carried mode, booted with
#   qemu-system-aarch64 for 01, 02 and 40-45; the static check's arm64 part
#   and its negative test.
# - Debian's 7.3 with another rustc (Debian 13's rustc-web): carried mode
#   chosen by itself, the load test, 02 and a revocable client (41).
# Ends with KERNELS-SUMMARY.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
mkdir -p build/logs
SUITE=kernels SUMMARY=KERNELS
# shellcheck source=tests/lib/check.sh
. tests/lib/check.sh
# The pinned sources of carried mode, fetched on the host (the root cannot
# see the cache).
kbuild/carried-source.sh build/carried-src || bad carried-source "kbuild/carried-source.sh failed"

# check_ko ENV_FILE ARGS...: check-ko.py where binutils read the object:
# on the host, or for another architecture's kernel (its env file names a
# GUEST_USERLAND) in the root, whose cross binutils do (paths under the
# root lose its prefix).
check_ko() {
	local envfile=$1
	shift
	if grep -qs '^GUEST_USERLAND="/' "$NVPM_CACHE/$envfile"; then
		NVPM_KERNEL_ENV=$envfile scripts/in-chroot.sh python3 tests/kocheck/check-ko.py "${@/#$CHROOT/}"
	else
		python3 tests/kocheck/check-ko.py "$@"
	fi
}

# kocheck_debian ENV_FILE NAME: check-ko.py on the kernel's own ib_core.ko.
kocheck_debian() {
	local ko conf
	# shellcheck source=/dev/null
	read -r conf ko < <(. "$NVPM_CACHE/$1" && echo "$KDIR_HOST/.config $(find "$DEBIAN_MODULES" -name 'ib_core.ko*' | head -n 1)")
	case $ko in
	*.xz) xz -dc "$ko" >build/logs/ib_core.ko ;;
	*.zst) zstd -qdc "$ko" >build/logs/ib_core.ko ;;
	*.ko) cp "$ko" build/logs/ib_core.ko ;;
	*) echo "FAIL $2/found: no ib_core.ko in the kernel's modules"; return ;;
	esac
	check_ko "$1" --name "$2" "$conf" build/logs/ib_core.ko
}

# run NAME ENV_FILE SCENARIOS GUEST_ENV [MAKE_ARGS...]: builds the module and
# the simulators for the kernel of ENV_FILE, boots its image for SCENARIOS,
# then reads the .ko as the kernel's config asks (tests/kocheck).
run() {
	local name=$1 envfile=$2 scenarios=$3 genv=$4 log=build/logs/guest-$1.log kdir
	shift 4
	# shellcheck disable=SC2016 # expanded inside the root
	NVPM_KERNEL_ENV=$envfile GUEST_SCENARIOS=$scenarios GUEST_ENV=$genv GUEST_OUT=build/guest-$name \
		scripts/in-chroot.sh sh -c 'make --no-print-directory KDIR="$KDIR" KMAKE_FLAGS="$KMAKE_FLAGS" "$@" check-guest' \
		sh "$@" 2>&1 | tee "$log"
	summary_add "$log" GUEST ||
		echo "  FAIL kernels/$name/build: the module or the simulators did not build for it (see $log)"
	# shellcheck source=/dev/null
	kdir=$(. "$NVPM_CACHE/$envfile" && echo "$KDIR_HOST")
	check_ko "$envfile" --name "kocheck/$name" "$kdir/.config" nvidia_peermem.ko >"$log.kocheck" 2>&1
	# The same check on Debian's own ib_core of that kernel, which nobody
	# here wrote: a check that fails it is wrong.
	kocheck_debian "$envfile" "kocheck/$name/debian-ib_core" >>"$log.kocheck" 2>&1
	sed 's/^/  /' "$log.kocheck"
	pass=$((pass + $(grep -c '^PASS' "$log.kocheck"))) fail=$((fail + $(grep -c '^FAIL' "$log.kocheck")))
}

for series in ${NVPM_OTHER_KSERIES:-7.2}; do
	echo "kernels: Debian $series"
	if ! KSERIES=$series scripts/provision.sh "$series"; then
		bad "$series/provision" "see the lines above"
		continue
	fi
	run "$series" "kernel-$series.env" '[04][0-5]-*' ""
done
for series in ${NVPM_CARRIED_KSERIES:-6.12 6.1}; do
	echo "kernels: Debian $series (without Rust: provisioned for the packaging suite's DKMS builds)"
	if ! scripts/provision-carried.sh "$series"; then
		bad "$series/provision" "see the lines above"
		continue
	fi
	# On a kernel with every x86 option (Debian 13's 6.12), the static
	# check's own test: a probe built with carried mode's flags for it passes,
	# and one built without each flag fails it.
	if [ "$series" = 6.12 ]; then
		log=build/logs/kocheck-negative-$series.log
		# shellcheck disable=SC2016 # expanded inside the root
		NVPM_KERNEL_ENV=kernel-$series.env scripts/in-chroot.sh sh -c 'make --no-print-directory KDIR="$KDIR" \
			KMAKE_FLAGS="$KMAKE_FLAGS" NVPM_RUST=carried carried-core >build/logs/carried-core-6.12.log 2>&1 ||
			{ echo "FAIL kocheck/negative/carried-core: see build/logs/carried-core-6.12.log"; exit 1; }
			tests/kocheck/negative.sh "$KDIR/.config"' >"$log" 2>&1
		sed 's/^/  /' "$log"
		summary_add "$log" KOCHECK || echo "  FAIL kernels/$series/kocheck-negative: see $log"
	fi
done

# Debian 11's 5.10 (NVPM_MAKE_KSERIES), without Rust: its headers name
# gcc-10, which neither root has, so it is built with make and gcc-12 (the
# env file's KMAKE_FLAGS), not through DKMS; carried mode chosen by itself,
# its image booted for 01, 02 and 40-45.
for series in ${NVPM_MAKE_KSERIES-5.10}; do
	echo "kernels: Debian $series (without Rust, built with make)"
	if ! scripts/provision-carried.sh "$series"; then
		bad "$series/provision" "see the lines above"
		continue
	fi
	run "$series" "kernel-$series.env" '[04][0-5]-*' ""
done

# Debian 13's arm64 6.12 (NVPM_ARM64_CARRIED_KSERIES), without Rust: its
# headers provisioned for arm64 (cross compilers, QEMU, the arm64 guest
# userland), the guest's tools built for aarch64, the module and the
# simulators cross-built with make in carried mode, Debian's arm64 image
# booted under TCG (-cpu max: BTI and pointer authentication enforced) for
# 01, 02 and 40-45; then the static check's arm64 negative test on the
# carried crates just built.
for series in ${NVPM_ARM64_CARRIED_KSERIES-6.12}; do
	echo "kernels: Debian $series arm64 (without Rust, cross-built with make)"
	if ! KARCH=arm64 scripts/provision-carried.sh "$series"; then
		bad "$series-arm64/provision" "see the lines above"
		continue
	fi
	if ! NVPM_KERNEL_ENV=kernel-$series-arm64.env scripts/build-tool.sh >build/logs/tool-arm64.log 2>&1; then
		bad "$series-arm64/tool" "the guest's tools did not build for aarch64 (see build/logs/tool-arm64.log)"
		continue
	fi
	run "$series-arm64" "kernel-$series-arm64.env" '[04][0-5]-*' ""
	log=build/logs/kocheck-negative-$series-arm64.log
	# shellcheck disable=SC2016 # expanded inside the root
	NVPM_KERNEL_ENV=kernel-$series-arm64.env scripts/in-chroot.sh sh -c 'tests/kocheck/negative.sh "$KDIR/.config"' >"$log" 2>&1
	sed 's/^/  /' "$log"
	summary_add "$log" KOCHECK || echo "  FAIL kernels/$series-arm64/kocheck-negative: see $log"
done

# Carried mode on Debian's 7.3, which has Rust, built with another rustc than
# the one its crates need (Debian 13's rustc-web, scripts/provision-rustc.sh):
# auto mode carries the crates, and the exact toolchain is no requirement.
if [ -z "${NVPM_CARRIED_KSERIES+set}" ] || [ -n "${NVPM_CARRIED_RUSTC:-}" ]; then
	echo "kernels: Debian 7.3 with rustc-web (carried mode)"
	if scripts/provision-rustc.sh; then
		run 7.3-rustc-web kernel.env '0[12]-* 41-*' "" NVPM_RUSTC=/opt/rustc-web/rustc
	else
		bad "7.3-rustc-web/provision" "see the lines above"
	fi
fi
# The build's choice of mode and its refusals (tests/kernels/kbuild-checks.sh), on
# the last carried kernel and the 7.3 tree.
# shellcheck source=/dev/null
if [ -r "$NVPM_CACHE/kernel.env" ] && norust=$(. "$NVPM_CACHE/kernel-6.12.env" 2>/dev/null && echo "$KDIR_HOST"); then
	tests/kernels/kbuild-checks.sh "$norust" "$(. "$NVPM_CACHE/kernel.env" && echo "$KDIR_HOST")" >build/logs/kbuild-checks.log 2>&1
	sed 's/^/  /' build/logs/kbuild-checks.log
	summary_add build/logs/kbuild-checks.log KBUILD || echo "  FAIL kernels/kbuild-checks: see build/logs/kbuild-checks.log"
fi
finish
