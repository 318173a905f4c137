#!/usr/bin/env bash
# make check's "arm64" suite: arm64 7.3 kernels (Grace's architecture),
# cross-built in the trixie root and booted with qemu-system-aarch64 (TCG,
# -M virt, -cpu max: BTI and pointer authentication enforced), with the
# kernel's ib_core and the simulators built for each, the module in kernel
# mode:
# - arm64 (4 KiB pages) and arm64-16k (16 KiB pages), Debian's own images:
#   the load test and the client scenarios (01, 02, 40-45); on 16 KiB pages
#   also the coherent platform's scenario (47);
# - arm64-64k (64 KiB pages, Grace's; Debian ships none): the project's
#   build of Debian's 7.3 with 64 KiB pages and symbol versions
#   (scripts/arm64-64k-kernel.sh): 01, 02, 40-45 and 47, then the module in
#   carried mode for 01 and 40-45.
# NVPM_ARM64_FLAVOURS picks the flavours (default arm64 arm64-16k; make
# check's arm64-64k suite runs arm64-64k, after its kernel's build).
# Ends with ARM64-SUMMARY.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
mkdir -p build/logs
SUITE=arm64 SUMMARY=ARM64
# shellcheck source=tests/lib/check.sh
. tests/lib/check.sh

# guest_run NAME SCENARIOS [MAKE_ARGS...]: the module and simulators built
# for $envfile's kernel, its image booted for SCENARIOS.
guest_run() {
	local name=$1 scenarios=$2 log=build/logs/guest-$1.log
	shift 2
	# shellcheck disable=SC2016 # expanded inside the root
	NVPM_KERNEL_ENV=$envfile GUEST_SCENARIOS=$scenarios GUEST_OUT=build/guest-$name \
		scripts/in-chroot.sh sh -c 'make --no-print-directory KDIR="$KDIR" KMAKE_FLAGS="$KMAKE_FLAGS" "$@" check-guest' \
		sh "$@" 2>&1 | tee "$log"
	summary_add "$log" GUEST ||
		echo "  FAIL arm64/$name/build: the module or the simulators did not build for it (see $log)"
}

tool_built=
for flavour in ${NVPM_ARM64_FLAVOURS:-arm64 arm64-16k}; do
	echo "arm64: 7.3 $flavour"
	envfile=kernel-7.3-$flavour.env
	# Debian's flavours are provisioned; the 64K kernel is built over
	# Debian's arm64 tree.
	case $flavour in
	*-64k) provision() { KARCH=arm64 scripts/provision.sh && scripts/arm64-64k-kernel.sh; } ;;
	*) provision() { KARCH=arm64 KFLAVOUR=$flavour scripts/provision.sh; } ;;
	esac
	if ! provision; then
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
	case $flavour in *-16k | *-64k) scenarios="$scenarios 47-*" ;; esac
	guest_run "$flavour" "$scenarios"
	if [ "$flavour" = arm64-64k ]; then
		if kbuild/carried-source.sh build/carried-src >build/logs/arm64-carried-src.log 2>&1; then
			guest_run "$flavour-carried" '01-* 4[0-5]-*' NVPM_RUST=carried
			check "$flavour-carried/page-size-guest" grep -qx "NVPM-PAGESIZE 65536" "build/guest-$flavour-carried/results.log.txt" "build/guest-$flavour-carried/serial.log.txt"
		else
			bad "$flavour-carried/source" "see build/logs/arm64-carried-src.log"
		fi
	fi
	# What ran is what was asked for: an aarch64 module, and a guest whose
	# kernel has the flavour's page size.
	# shellcheck source=/dev/null
	config=$(. "$NVPM_CACHE/$envfile" && echo "$KDIR_HOST/.config")
	case $flavour in
	*-16k) want=CONFIG_ARM64_16K_PAGES=y bytes=16384 release="7\.[0-9.]*+deb13-$flavour" ;;
	*-64k) want=CONFIG_ARM64_64K_PAGES=y bytes=65536 release="7\.[0-9.]*-nvpm-64k" ;;
	*) want=CONFIG_ARM64_4K_PAGES=y bytes=4096 release="7\.[0-9.]*+deb13-$flavour" ;;
	esac
	check "$flavour/page-size-config" grep -qx "$want" "$config"
	check "$flavour/page-size-guest" grep -qx "NVPM-PAGESIZE $bytes" "build/guest-$flavour/results.log.txt" "build/guest-$flavour/serial.log.txt"
	check "$flavour/module-aarch64" sh -c 'file -b nvidia_peermem.ko | grep -q aarch64'
	check "$flavour/guest-kernel" grep -q "Linux version $release " "build/guest-$flavour/dmesg.txt"
	if [ "$flavour" = arm64-64k ]; then
		# Symbol versions, as on Ubuntu's linux-nvidia-64k: the module's
		# own __versions table (scenario 02 checks the loader's side).
		check "$flavour/modversions-config" grep -qx CONFIG_MODVERSIONS=y "$config"
		# find-symvers.sh reads gendwarfksyms' CRCs from the RDMA core's
		# module files as this kernel's build wrote them in Module.symvers.
		# shellcheck source=/dev/null
		tool_results tests/neighbours/real-tables.sh "arm64/$flavour/crc-tables" \
			"$(. "$NVPM_CACHE/$envfile" && echo "$DEBIAN_MODULES")" "${config%/.config}/Module.symvers"
	fi
done
finish
