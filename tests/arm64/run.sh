#!/usr/bin/env bash
# make check's "arm64" suite: Debian's arm64 7.3 kernels (Grace's
# architecture), cross-built in the trixie root and booted from Debian's own
# images with qemu-system-aarch64 (TCG, -M virt, -cpu max: BTI and pointer
# authentication enforced), with Debian's ib_core and the simulators built
# for each, the module in kernel mode:
# - arm64 (4 KiB pages) and arm64-16k (16 KiB pages): the load test and the
#   client scenarios (01, 02, 40-45); on 16 KiB pages also the coherent
#   platform's scenario where it exists (47).
# NVPM_ARM64_FLAVOURS picks the flavours (default both). Ends with
# ARM64-SUMMARY.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
mkdir -p build/logs
SUITE=arm64 SUMMARY=ARM64
# shellcheck source=tests/lib/check.sh
. tests/lib/check.sh

tool_built=
for flavour in ${NVPM_ARM64_FLAVOURS:-arm64 arm64-16k}; do
	echo "arm64: Debian 7.3 $flavour"
	envfile=kernel-7.3-$flavour.env
	if ! KARCH=arm64 KFLAVOUR=$flavour scripts/provision.sh; then
		bad "$flavour/provision" "see the lines above"
		continue
	fi
	# The guest's tools: one aarch64 build serves every flavour.
	if [ -z "$tool_built" ]; then
		if NVPM_KERNEL_ENV=$envfile scripts/build-tool.sh >build/logs/arm64-tool.log 2>&1; then
			tool_built=1
		else
			bad tool "see build/logs/arm64-tool.log"
			break
		fi
	fi
	scenarios='[04][0-5]-*'
	case $flavour in *-16k) [ ! -e tests/guest/scenarios/47-client-coherent.sh ] || scenarios="$scenarios 47-*" ;; esac
	log=build/logs/guest-$flavour.log
	# shellcheck disable=SC2016 # expanded inside the root
	NVPM_KERNEL_ENV=$envfile GUEST_SCENARIOS=$scenarios GUEST_OUT=build/guest-$flavour \
		scripts/in-chroot.sh sh -c 'make --no-print-directory KDIR="$KDIR" KMAKE_FLAGS="$KMAKE_FLAGS" check-guest' \
		2>&1 | tee "$log"
	summary_add "$log" GUEST ||
		echo "  FAIL arm64/$flavour/build: the module or the simulators did not build for it (see $log)"
	# What ran is what was asked for: an aarch64 module, and a guest whose
	# kernel has the flavour's page size.
	# shellcheck source=/dev/null
	config=$(. "$NVPM_CACHE/$envfile" && echo "$KDIR_HOST/.config")
	case $flavour in
	*-16k) want=CONFIG_ARM64_16K_PAGES=y bytes=16384 ;;
	*) want=CONFIG_ARM64_4K_PAGES=y bytes=4096 ;;
	esac
	check "$flavour/page-size-config" grep -qx "$want" "$config"
	check "$flavour/page-size-guest" grep -qx "NVPM-PAGESIZE $bytes" "build/guest-$flavour/serial.log.txt"
	check "$flavour/module-aarch64" sh -c 'file -b nvidia_peermem.ko | grep -q aarch64'
	check "$flavour/guest-kernel" grep -q "Linux version 7\.[0-9.]*+deb13-$flavour " "build/guest-$flavour/dmesg.txt"
done
finish
