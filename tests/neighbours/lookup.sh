#!/usr/bin/env bash
# Checks of scripts/find-symvers.sh (in the host suite, run in the trixie
# root for its kmod and binutils: scripts/in-chroot.sh tests/neighbours/lookup.sh):
# where the CRCs of the NVIDIA driver and of the RDMA core come from, on the
# layouts the real packages leave (tests/neighbours/README.md says where each
# was read). Each layout is a root with /lib/modules/<kernel>/ indexed by the
# real depmod, so the exporter found is the one modprobe would load. The
# modules are small ELF objects with a module's export tables (__ksymtab*,
# __kcrctab*, .modinfo), written here: their CRCs are made up, the places
# are the packages'. That the tables are read as the kernel writes them is
# checked against real modules elsewhere (tests/neighbours/README.md).
# On such layouts, what packaging/dkms-rebuild.sh (the packages' trigger)
# says when the driver's modules are not installed for the kernel: gone,
# or still to be built by DKMS (a driver upgrade between its unpack and
# its postinst); dkms is a stand-in.
# Ends with "NEIGHBOURS-SUMMARY N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
FS=$PWD/scripts/find-symvers.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
SUITE=neighbours SUMMARY=NEIGHBOURS
# shellcheck source=tests/lib/check.sh
. tests/lib/check.sh

K=6.12.57+deb13-amd64 # the kernel built for
K2=6.12.48+deb13-amd64 # another kernel of the same host
VM="SMP preempt mod_unload modversions "

# mkko FILE NAME VERMAGIC VERSION STYLE SYM=CRC[:gpl]...: a module file
# exporting SYMs. STYLE: kcrctab (CRCs in __kcrctab*, Linux 5.19 on), flags
# (one __ksymtab and __kcrctab, GPL-only a bit in __kflagstab: Debian's
# 7.3, not its 6.12) or
# abs (absolute __crc_ symbols, before 5.19). FILE's suffix compresses it
# (.xz, .zst, .gz).
mkko() {
	local file=$1 name=$2 vermagic=$3 version=$4 style=$5 s sym crc sec
	shift 5
	mkdir -p "$(dirname "$file")"
	{
		echo '	.section __ksymtab_strings,"aMS",@progbits,1'
		for s in "$@"; do echo "	.asciz \"${s%%=*}\""; done
		for s in "$@"; do
			sym=${s%%=*} crc=${s#*=} sec='' gpl=0
			case $crc in *:gpl) sec=_gpl crc=${crc%:gpl} gpl=1 ;; esac
			if [ "$style" = flags ]; then
				sec=
				echo '	.section __kflagstab,"a"'
				echo "	.globl __flags_$sym"
				echo "__flags_$sym: .byte $gpl"
			fi
			echo "	.section __ksymtab$sec,\"a\""
			echo "	.globl __ksymtab_$sym"
			echo "__ksymtab_$sym: .long 0, 0, 0"
			if [ "$style" = abs ]; then
				echo "	.globl __crc_$sym"
				echo "	.set __crc_$sym, $crc"
			else
				echo "	.section __kcrctab$sec,\"a\""
				echo "	.globl __crc_$sym"
				echo "__crc_$sym: .long $crc"
			fi
		done
		echo '	.section .modinfo,"a"'
		[ -z "$version" ] || echo "	.asciz \"version=$version\""
		echo "	.asciz \"name=$name\""
		echo "	.asciz \"vermagic=$vermagic\""
	} >"$work/ko.s"
	as "$work/ko.s" -o "$work/ko.o" || return 1
	case $file in
	*.xz) xz -c "$work/ko.o" >"$file" ;;
	*.zst) zstd -qc "$work/ko.o" >"$file" ;;
	*.gz) gzip -c "$work/ko.o" >"$file" ;;
	*) cp "$work/ko.o" "$file" ;;
	esac
}
P2P="nvidia_p2p_get_pages=0x1a2b3c4d nvidia_p2p_put_pages=0x2b3c4d5e nvidia_p2p_dma_map_pages=0x3c4d5e6f"
P2P535="nvidia_p2p_get_pages=0x0badc0de nvidia_p2p_put_pages=0x2b3c4d5e nvidia_p2p_dma_map_pages=0x3c4d5e6f"
PEER="ib_register_peer_memory_client=0x4d5e6f70 ib_unregister_peer_memory_client=0x5e6f7081"
# The kernel's own RDMA core: the same module names, no peer-memory API.
kernel_rdma() { # ROOT KREL SUFFIX
	mkko "$1/lib/modules/$2/kernel/drivers/infiniband/core/ib_core.ko$3" ib_core "$2 $VM" "" kcrctab ib_register_client=0x11111111:gpl
	mkko "$1/lib/modules/$2/kernel/drivers/infiniband/core/ib_uverbs.ko$3" ib_uverbs "$2 $VM" "" kcrctab ib_umem_get=0x22222222:gpl
}
index() { depmod -b "$1" "$2" 2>"$work/depmod.err" || { cat "$work/depmod.err"; return 1; }; }
# The doctor's lookup (src/doctor/examples/exporters.rs, built by the host
# suite), held to find-symvers.sh's on each layout: the build and the
# doctor must find the same exporters and read the same CRCs.
EXPORTERS=${NVPM_EXPORTERS:-}
[ -x "$EXPORTERS" ] || echo "SKIP neighbours/*-doctor-agrees: no doctor lookup (NVPM_EXPORTERS=${EXPORTERS:-unset})"
# run NAME ROOT [KREL]: find-symvers.sh for KREL in ROOT; sets out, rc and
# table; then NAME-doctor-agrees.
run() {
	rm -f "$work/table"
	out=$(NVPM_SYSROOT=$2 sh "$FS" "${3:-$K}" "$work/table" 2>&1)
	rc=$?
	table=$(cat "$work/table" 2>/dev/null)
	[ -x "$EXPORTERS" ] && doctor_agrees "$1" "$2" "${3:-$K}"
}
# doctor_agrees NAME ROOT KREL: where find-symvers.sh took CRCs, the doctor
# names the same files and reads the same CRCs for the imports; where it
# found no module exporting a symbol, neither does the doctor; where it
# refused a module built for another kernel, the doctor reads that kernel
# from it too (kernel.rust then says the build stops).
doctor_agrees() {
	local doc want got
	doc=$("$EXPORTERS" "$2" "$3" 2>&1)
	if [ "$rc" = 0 ]; then
		want=$(sed -n 's/^nvidia_peermem: CONFIG_MODVERSIONS=y: CRCs from //p' <<<"$out")
		got=$(awk -F '\t' '$1 == "file" { printf "%s%s", sep, $2; sep = " " }' <<<"$doc")
		if [ "$want" != "$got" ]; then bad "$1-doctor-agrees" "files: find-symvers.sh \"$want\", the doctor \"$got\""; return; fi
		want=$(awk -F '\t' '{ print tolower($1), $2 }' <<<"$table" | sort)
		got=$(awk -F '\t' '$1 == "crc" && $3 ~ /^nvidia_p2p_|_peer_memory_client$/ { print tolower($2), $3 }' <<<"$doc" | sort)
		if [ "$want" = "$got" ]; then ok "$1-doctor-agrees"; else bad "$1-doctor-agrees" "CRCs: find-symvers.sh [$want], the doctor [$got]"; fi
		return
	fi
	local whose missing=0 other
	other=$(sed -n 's/.* is built for \([^ ,]*\), not for .*/\1/p' <<<"$out")
	if [ -n "$other" ]; then
		if grep -qxF "built-for	$other" <<<"$doc"; then ok "$1-doctor-agrees"; else bad "$1-doctor-agrees" "find-symvers.sh: built for $other; the doctor: $doc"; fi
		return
	fi
	for whose in "the NVIDIA driver" "the RDMA core"; do
		grep -qF "$whose's (" <<<"$out" || continue
		missing=1
		grep -qxF "none	$whose" <<<"$doc" || { bad "$1-doctor-agrees" "find-symvers.sh finds no module for $whose; the doctor: $doc"; return; }
	done
	[ $missing = 0 ] || ok "$1-doctor-agrees"
}
# has NAME TEXT: the last run's output has TEXT (fixed string).
has() { if grep -qF -- "$2" <<<"$out"; then ok "$1"; else bad "$1" "no \"$2\" in: $out (exit $rc)"; fi; }
lacks() { if ! grep -qF -- "$2" <<<"$out"; then ok "$1"; else bad "$1" "\"$2\" in: $out"; fi; }
crc_is() { # NAME SYMBOL CRC MODULE TYPE: a line of the last table
	local want
	want=$(printf '%s\t%s\t%s\t%s\t' "$3" "$2" "$4" "$5")
	if grep -qxF -- "$want" <<<"$table"; then ok "$1"; else bad "$1" "no \"$want\" in the table: $table (exit $rc: $out)"; fi
}
exit_is() { if [ "$rc" = "$2" ]; then ok "$1"; else bad "$1" "exit $rc, want $2: $out"; fi; }

# --- Debian 13: DKMS 3.2.2, xz-compressed modules, the table kept ---------
# nvidia-kernel-dkms 550.163.01 installs nvidia-current*.ko in updates/dkms;
# DKMS 3.2.2 keeps build/Module.symvers under <kernel>/<arch>/module/. MOFED's
# mlnx-ofed-kernel-dkms installs ib_core and ib_uverbs in updates/dkms too.
r=$work/deb13
kernel_rdma "$r" "$K" .xz
# shellcheck disable=SC2086 # the symbol lists are words
mkko "$r/lib/modules/$K/updates/dkms/nvidia-current.ko.xz" nvidia "$K $VM" 550.163.01 kcrctab $P2P
mkko "$r/lib/modules/$K/updates/dkms/ib_core.ko.xz" ib_core "$K $VM" 25.10-OFED.25.10.1.7.1 kcrctab ib_register_client=0x33333333:gpl
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K/updates/dkms/ib_uverbs.ko.xz" ib_uverbs "$K $VM" 25.10-OFED.25.10.1.7.1 kcrctab $PEER
mkdir -p "$r/var/lib/dkms/nvidia-current/550.163.01/$K/x86_64/module"
printf '0x1a2b3c4d\tnvidia_p2p_get_pages\tnvidia\tEXPORT_SYMBOL\t\n' >"$r/var/lib/dkms/nvidia-current/550.163.01/$K/x86_64/module/Module.symvers"
index "$r" "$K"
run deb13 "$r"
exit_is deb13-builds 0
has deb13-names-both "CRCs from /lib/modules/$K/updates/dkms/nvidia-current.ko.xz /lib/modules/$K/updates/dkms/ib_uverbs.ko.xz"
has deb13-driver-version "(nvidia 550.163.01, exports nvidia_p2p_get_pages for $K)"
crc_is deb13-driver-crc nvidia_p2p_get_pages 0x1a2b3c4d nvidia EXPORT_SYMBOL
crc_is deb13-driver-crc-2 nvidia_p2p_dma_map_pages 0x3c4d5e6f nvidia EXPORT_SYMBOL
crc_is deb13-ofed-crc ib_register_peer_memory_client 0x4d5e6f70 ib_uverbs EXPORT_SYMBOL
crc_is deb13-ofed-crc-2 ib_unregister_peer_memory_client 0x5e6f7081 ib_uverbs EXPORT_SYMBOL
n=$(wc -l <<<"$table")
if [ "$n" = 5 ]; then ok deb13-only-imports; else bad deb13-only-imports "$n lines, want 5: $table"; fi

# --- Debian 12: DKMS 3.0.10 keeps no table; a 535 table left behind --------
# After the upgrade 535 -> 550 the old driver's Module.symvers was still on
# disk; its CRCs must not be taken.
r=$work/deb12
kernel_rdma "$r" "$K" ""
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K/updates/dkms/nvidia-current.ko" nvidia "$K $VM" 550.163.01 kcrctab $P2P
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K/updates/dkms/ib_uverbs.ko" ib_uverbs "$K $VM" 25.07-OFED.25.07.0.9.7.1 kcrctab $PEER
mkdir -p "$r/usr/src/nvidia-current-535.261.03" "$r/var/lib/dkms/nvidia-current/535.261.03/build"
for t in "$r/usr/src/nvidia-current-535.261.03" "$r/var/lib/dkms/nvidia-current/535.261.03/build"; do
	printf '0x0badc0de\tnvidia_p2p_get_pages\tnvidia\tEXPORT_SYMBOL\t\n' >"$t/Module.symvers"
done
# DKMS's copy of the old build's module, kept in its tree.
# shellcheck disable=SC2086
mkko "$r/var/lib/dkms/nvidia-current/535.261.03/$K/x86_64/module/nvidia-current.ko" nvidia "$K $VM" 535.261.03 kcrctab $P2P535
index "$r" "$K"
run deb12 "$r"
exit_is deb12-builds 0
crc_is deb12-installed-driver nvidia_p2p_get_pages 0x1a2b3c4d nvidia EXPORT_SYMBOL
lacks deb12-not-the-old-table 535.261.03

# --- NVIDIA's .run installer: kernel/drivers/video, no DKMS ----------------
# MOFED's prebuilt mlnx-ofed-kernel-modules: INSTALL_MOD_DIR=updates.
r=$work/run-installer
kernel_rdma "$r" "$K" ""
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K/kernel/drivers/video/nvidia.ko" nvidia "$K $VM" 580.95.05 kcrctab $P2P
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K/updates/drivers/infiniband/core/ib_uverbs.ko" ib_uverbs "$K $VM" 25.10-OFED.25.10.1.7.1 kcrctab $PEER
index "$r" "$K"
run run-installer "$r"
exit_is run-installer-builds 0
has run-installer-names "CRCs from /lib/modules/$K/kernel/drivers/video/nvidia.ko /lib/modules/$K/updates/drivers/infiniband/core/ib_uverbs.ko"
has run-installer-updates-first "(ib_uverbs 25.10-OFED.25.10.1.7.1, exports"

# --- a prebuilt driver package (Ubuntu's linux-modules-nvidia-*): zstd -----
r=$work/prebuilt
kernel_rdma "$r" "$K" .zst
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K/kernel/nvidia-570srv/nvidia.ko.zst" nvidia "$K $VM" 570.195.03 kcrctab $P2P
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K/updates/dkms/ib_uverbs.ko.zst" ib_uverbs "$K $VM" 25.10-OFED.25.10.1.7.1 kcrctab $PEER
index "$r" "$K"
run prebuilt "$r"
exit_is prebuilt-builds 0
crc_is prebuilt-driver-crc nvidia_p2p_put_pages 0x2b3c4d5e nvidia EXPORT_SYMBOL
has prebuilt-names "/lib/modules/$K/kernel/nvidia-570srv/nvidia.ko.zst"

# --- CRCs as absolute symbols (before Linux 5.19), GPL-only exports --------
r=$work/abs
K510=5.10.0-36-amd64
kernel_rdma "$r" "$K510" ""
mkko "$r/lib/modules/$K510/updates/dkms/nvidia.ko" nvidia "$K510 SMP mod_unload modversions " 535.261.03 abs \
	nvidia_p2p_get_pages=0x89abcdef:gpl nvidia_p2p_put_pages=0x00c0ffee:gpl
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K510/updates/dkms/ib_core.ko" ib_core "$K510 SMP mod_unload modversions " 5.8-OFED.5.8.1 abs $PEER
index "$r" "$K510"
run abs "$r" "$K510"
exit_is abs-builds 0
crc_is abs-crc nvidia_p2p_get_pages 0x89abcdef nvidia EXPORT_SYMBOL_GPL
crc_is abs-crc-leading-zeros nvidia_p2p_put_pages 0x00c0ffee nvidia EXPORT_SYMBOL_GPL
crc_is abs-ofed-ib-core ib_register_peer_memory_client 0x4d5e6f70 ib_core EXPORT_SYMBOL

# --- newer kernels (7.3): GPL-only in __kflagstab, one __ksymtab ---------------
r=$work/flags
K73=7.3.4+deb13-amd64
kernel_rdma "$r" "$K73" .xz
mkko "$r/lib/modules/$K73/updates/dkms/nvidia.ko.xz" nvidia "$K73 $VM" 595.44.02 flags \
	nvidia_p2p_get_pages=0x1a2b3c4d nvidia_p2p_put_pages=0x2b3c4d5e:gpl
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K73/updates/dkms/ib_uverbs.ko.xz" ib_uverbs "$K73 $VM" 25.10 flags $PEER
index "$r" "$K73"
run flags "$r" "$K73"
exit_is flags-builds 0
crc_is flags-not-gpl nvidia_p2p_get_pages 0x1a2b3c4d nvidia EXPORT_SYMBOL
crc_is flags-gpl nvidia_p2p_put_pages 0x2b3c4d5e nvidia EXPORT_SYMBOL_GPL

# --- refusals: a clear error, no table ---------------------------------------
# The driver's DKMS source is registered and built for another kernel only;
# OFED's headers for another kernel behind /usr/src/ofa_kernel/default.
r=$work/not-built
kernel_rdma "$r" "$K" .xz
kernel_rdma "$r" "$K2" .xz
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K2/updates/dkms/nvidia-current.ko.xz" nvidia "$K2 $VM" 550.163.01 kcrctab $P2P
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K2/updates/dkms/ib_uverbs.ko.xz" ib_uverbs "$K2 $VM" 25.10-OFED.25.10.1.7.1 kcrctab $PEER
mkdir -p "$r/var/lib/dkms/nvidia-current/550.163.01/source" "$r/usr/src/ofa_kernel-dkms/x86_64/$K2" "$r/usr/src/ofa_kernel/x86_64"
printf '0x4d5e6f70\tib_register_peer_memory_client\tib_uverbs\tEXPORT_SYMBOL\t\n' >"$r/usr/src/ofa_kernel-dkms/x86_64/$K2/Module.symvers"
ln -s "/usr/src/ofa_kernel-dkms/x86_64/$K2" "$r/usr/src/ofa_kernel/x86_64/$K2"
ln -s "/usr/src/ofa_kernel/x86_64/$K2" "$r/usr/src/ofa_kernel/default"
index "$r" "$K" && index "$r" "$K2"
run not-built "$r"
exit_is not-built-refused 1
has not-built-says-dkms "DKMS has nvidia-current/550.163.01 but no build of it installed for $K: dkms autoinstall -k $K"
has not-built-kernel-rdma "$K's RDMA core (/lib/modules/$K/kernel/drivers/infiniband/core/ib_"
has not-built-names-packages "mlnx-ofed-kernel-dkms"
lacks not-built-no-other-kernel "$K2/"
if [ -z "$table" ]; then ok not-built-no-table; else bad not-built-no-table "a table was written: $table"; fi
run other-kernel-ok "$r" "$K2"
exit_is other-kernel-builds-for-its-own 0

# MOFED's DKMS module registered (the rpm's name), not built for this kernel.
r=$work/ofed-not-built
kernel_rdma "$r" "$K" .xz
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K/updates/dkms/nvidia-current.ko.xz" nvidia "$K $VM" 550.163.01 kcrctab $P2P
mkdir -p "$r/var/lib/dkms/mlnx-ofa_kernel/25.10/source"
index "$r" "$K"
run ofed-not-built "$r"
exit_is ofed-not-built-refused 1
has ofed-not-built-says-dkms "DKMS has mlnx-ofa_kernel/25.10 but no build of it installed for $K: dkms autoinstall -k $K"

# A module of another kernel copied into this kernel's tree by hand.
r=$work/wrong-vermagic
kernel_rdma "$r" "$K" ""
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K/updates/nvidia.ko" nvidia "$K2 $VM" 550.163.01 kcrctab $P2P
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K/updates/ib_uverbs.ko" ib_uverbs "$K $VM" 25.10 kcrctab $PEER
index "$r" "$K"
run wrong-vermagic "$r"
exit_is wrong-vermagic-refused 1
has wrong-vermagic-says "/lib/modules/$K/updates/nvidia.ko (exports nvidia_p2p_get_pages for $K) is built for $K2, not for $K"

# A module without CRCs (a build without CONFIG_MODVERSIONS): it exports
# nvidia_p2p_get_pages (depmod indexes it), with no __crc_ for it.
r=$work/no-crcs
kernel_rdma "$r" "$K" ""
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K/updates/ib_uverbs.ko" ib_uverbs "$K $VM" 25.10 kcrctab $PEER
printf '\t.section __ksymtab_strings,"aMS",@progbits,1\n\t.asciz "nvidia_p2p_get_pages"\n\t.section __ksymtab,"a"\n\t.globl __ksymtab_nvidia_p2p_get_pages\n__ksymtab_nvidia_p2p_get_pages: .long 0,0,0\n\t.section .modinfo,"a"\n\t.asciz "name=nvidia"\n\t.asciz "vermagic=%s SMP mod_unload "\n' "$K" >"$work/nocrc.s"
as "$work/nocrc.s" -o "$r/lib/modules/$K/updates/nvidia.ko"
index "$r" "$K"
run no-crcs "$r"
exit_is no-crcs-refused 1
has no-crcs-says "has no CRC for nvidia_p2p_get_pages: is it a build with CONFIG_MODVERSIONS=y?"

# Modules installed, depmod not run.
r=$work/no-index
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K/updates/nvidia.ko" nvidia "$K $VM" 550.163.01 kcrctab $P2P
run no-index "$r"
exit_is no-index-refused 1
has no-index-says "no module index for $K (/lib/modules/$K/modules.dep, modules.symbols): run depmod $K"
# No modules at all for the kernel: both exporters named as missing.
mkdir -p "$work/empty"
run no-modules "$work/empty"
exit_is no-modules-refused 1
has no-modules-driver "the NVIDIA driver's (nvidia_p2p_get_pages): no module of $K exports it; install the NVIDIA driver's kernel modules for $K (Debian: nvidia-kernel-dkms"
has no-modules-rdma "the RDMA core's (ib_register_peer_memory_client): no module of $K exports it; install DOCA-OFED's"

# --- exporters.conf: a driver built outside any package ----------------------
r=$work/conf
kernel_rdma "$r" "$K" ""
# shellcheck disable=SC2086
mkko "$r/lib/modules/$K/updates/ib_uverbs.ko" ib_uverbs "$K $VM" 25.10 kcrctab $PEER
# shellcheck disable=SC2086
mkko "$r/opt/nvidia/$K/nvidia.ko" nvidia "$K $VM" 580.95.05 kcrctab $P2P
index "$r" "$K"
mkdir -p "$r/etc/nvidia-peer-memory"
printf '# by hand\ndriver /opt/nvidia/{kernel}/nvidia.ko\n' >"$r/etc/nvidia-peer-memory/exporters.conf"
run conf "$r"
exit_is conf-builds 0
has conf-names "CRCs from /opt/nvidia/$K/nvidia.ko /lib/modules/$K/updates/ib_uverbs.ko"
has conf-says-where "named in /etc/nvidia-peer-memory/exporters.conf"
printf 'driver /opt/nvidia/{kernel}/missing.ko\n' >"$r/etc/nvidia-peer-memory/exporters.conf"
run conf-missing "$r"
exit_is conf-missing-refused 1
has conf-missing-says "/etc/nvidia-peer-memory/exporters.conf names /opt/nvidia/$K/missing.ko for the driver, and there is no such file"
# A table named by hand that is a stub (CRCs of 0).
printf '0x00000000\tnvidia_p2p_get_pages\tnvidia\tEXPORT_SYMBOL\t\n' >"$r/opt/nvidia/stub.symvers"
printf 'driver /opt/nvidia/stub.symvers\n' >"$r/etc/nvidia-peer-memory/exporters.conf"
run conf-stub "$r"
exit_is conf-stub-refused 1
has conf-stub-says "has CRCs of 0: it is not from a CONFIG_MODVERSIONS build for $K"

# --- --exports and --sources --------------------------------------------------
out=$(sh "$FS" --exports "$work/deb13/lib/modules/$K/updates/dkms/ib_uverbs.ko.xz" 2>&1) rc=$?
table=$out
crc_is exports-one-file ib_register_peer_memory_client 0x4d5e6f70 ib_uverbs EXPORT_SYMBOL
out=$(sh "$FS" --exports "$work/deb13/var/lib/dkms/nvidia-current/550.163.01/$K/x86_64/module/Module.symvers" 2>&1) rc=$?
exit_is exports-not-elf 1
has exports-not-elf-says "not an ELF file"
out=$(NVPM_SYSROOT=$work/deb13 sh "$FS" --sources "$K" 2>&1) rc=$?
if [ "$out" = "$(printf '%s\n%s' "$work/deb13/lib/modules/$K/updates/dkms/nvidia-current.ko.xz" "$work/deb13/lib/modules/$K/updates/dkms/ib_uverbs.ko.xz")" ]; then
	ok sources; else bad sources "got: $out"; fi

# --- dkms-rebuild: the driver's modules not installed for the kernel ---------
# The trigger's dkms-rebuild on a MODVERSIONS kernel whose driver modules
# are not installed (the RDMA core's are), after a change of its inputs.
# dkms is a stand-in: it lists our module as installed for $K and records
# every call, so that a build tried shows (the installed module must stay).
RB=$PWD/packaging/dkms-rebuild.sh
mkdir -p "$work/bin"
# shellcheck disable=SC2016 # the stand-in's own variables
printf '%s\n' '#!/bin/sh' 'echo "$*" >>"$NVPM_TEST_DKMS_LOG"' \
	'[ "$1 $2 $3" = "status -m nvidia-peer-memory" ] && echo "nvidia-peer-memory/1.0.0, $NVPM_TEST_KREL, x86_64: installed"' \
	'exit 0' >"$work/bin/dkms"
chmod +x "$work/bin/dkms"
rb_root() { # ROOT: $K with MODVERSIONS, MOFED's ib_uverbs, no driver module, our DKMS source
	kernel_rdma "$1" "$K" .xz
	# shellcheck disable=SC2086
	mkko "$1/lib/modules/$K/updates/dkms/ib_uverbs.ko.xz" ib_uverbs "$K $VM" 25.10-OFED.25.10.1.7.1 kcrctab $PEER
	index "$1" "$K"
	mkdir -p "$1/lib/modules/$K/build" "$1/usr/src/nvidia-peer-memory-1.0.0/scripts" "$1/var/lib/nvidia-peer-memory/inputs"
	echo CONFIG_MODVERSIONS=y >"$1/lib/modules/$K/build/.config"
	cp "$FS" "$1/usr/src/nvidia-peer-memory-1.0.0/scripts/"
	# What the last rebuild recorded: the inputs before the change.
	echo before >"$1/var/lib/nvidia-peer-memory/inputs/$K"
}
driver_src() { # ROOT NAME VERSION: the driver's DKMS source unpacked in /usr/src
	mkdir -p "$1/usr/src/$2-$3/nvidia"
	printf 'PACKAGE_NAME="%s"\nPACKAGE_VERSION="%s"\nAUTOINSTALL=yes\n' "$2" "$3" >"$1/usr/src/$2-$3/dkms.conf"
	cp src/ffi/nv-p2p.h "$1/usr/src/$2-$3/nvidia/nv-p2p.h"
}
# rebuild ROOT [ARGS]: dkms-rebuild on ROOT; sets out, rc and calls (what
# it asked the stand-in besides status).
rebuild() {
	local r=$1
	shift
	: >"$r/dkms.log"
	out=$(PATH=$work/bin:$PATH NVPM_SYSROOT=$r NVPM_STATE=$r/var/lib/nvidia-peer-memory/inputs \
		NVPM_TEST_DKMS_LOG=$r/dkms.log NVPM_TEST_KREL=$K sh "$RB" "$@" 2>&1)
	rc=$?
	calls=$(grep -v '^status ' "$r/dkms.log")
}
kept() { # NAME: the last rebuild exited 0 and built nothing
	if [ -z "$calls" ] && [ "$rc" = 0 ]; then ok "$1"; else bad "$1" "exit $rc, dkms called: $calls"; fi
}
quiet() { if [ -z "$out" ]; then ok "$1"; else bad "$1" "said: $out"; fi; }

# The driver upgraded (Debian 12's 535 to 550, seen in make check-neighbours):
# dpkg ran our trigger after the driver package's unpack, before its
# postinst. The old version's prerm took 535 out of DKMS and its modules
# away; 550's source is in /usr/src, not yet added to DKMS nor built.
r=$work/rb-unpacked
rb_root "$r"
driver_src "$r" nvidia-current 550.163.01
rebuild "$r"
has rb-unpacked-says-pending "nvidia-peer-memory: not rebuilt for $K yet: the NVIDIA driver's DKMS module nvidia-current/550.163.01 is present but not built for $K yet"
has rb-unpacked-says-rebuilt-after "then it is rebuilt against it: DKMS 3.2.2 and later run /usr/lib/nvidia-peer-memory/dkms-rebuild as their post_transaction command; with older DKMS, run /usr/lib/nvidia-peer-memory/dkms-rebuild afterwards"
has rb-unpacked-says-autoinstall "\`dkms autoinstall -k $K\`"
lacks rb-unpacked-not-gone "install the NVIDIA driver"
lacks rb-unpacked-no-warning "warning"
kept rb-unpacked-module-kept
if [ -s "$r/var/lib/nvidia-peer-memory/inputs/$K.failed" ]; then ok rb-unpacked-recorded; else bad rb-unpacked-recorded "no $K.failed"; fi
# The trigger fires again (another package): nothing more to say.
rebuild "$r"
quiet rb-unpacked-once
# DKMS's post_transaction command after another module's transaction: silent.
rm -f "$r/var/lib/nvidia-peer-memory/inputs/$K.failed"
rebuild "$r" --after-dkms nvidia-current
quiet rb-unpacked-after-dkms-quiet
out=$(NVPM_SYSROOT=$r sh "$FS" --driver-pending "$K" 2>&1) rc=$?
if [ "$rc $out" = "0 nvidia-current/550.163.01" ]; then ok rb-unpacked-driver-pending; else bad rb-unpacked-driver-pending "exit $rc: $out"; fi
run rb-unpacked-lookup "$r"
exit_is rb-unpacked-lookup-refused 1
has rb-unpacked-lookup-says "the NVIDIA driver's DKMS module nvidia-current/550.163.01 is in /usr/src, not yet added to DKMS nor built for $K"
lacks rb-unpacked-lookup-not-gone "install the NVIDIA driver"

# The driver's DKMS module registered (added, built for another kernel
# only): its build for $K is still to come.
r=$work/rb-added
rb_root "$r"
driver_src "$r" nvidia-current 550.163.01
mkdir -p "$r/var/lib/dkms/nvidia-current/550.163.01/source" "$r/var/lib/dkms/nvidia-current/550.163.01/$K2/x86_64/module"
rebuild "$r"
has rb-added-says-pending "not rebuilt for $K yet: the NVIDIA driver's DKMS module nvidia-current/550.163.01 is present but not built for $K yet"
lacks rb-added-not-gone "install the NVIDIA driver"
kept rb-added-module-kept
# DKMS's build of it for $K in its tree, not installed: not a build still
# to come; the warning names DKMS's module and what to run.
mkdir -p "$r/var/lib/dkms/nvidia-current/550.163.01/$K/x86_64/module"
rm -f "$r/var/lib/nvidia-peer-memory/inputs/$K.failed"
rebuild "$r"
has rb-built-says-warning "nvidia-peer-memory: warning: not rebuilt for $K: "
has rb-built-says-dkms "DKMS has nvidia-current/550.163.01 but no build of it installed for $K: dkms autoinstall -k $K"
lacks rb-built-not-pending "is present but not built"
kept rb-built-module-kept

# The driver removed: no DKMS module, no source of it (GPUDirect Storage's
# nvidia-fs source is not the driver's). The message says what to install.
r=$work/rb-removed
rb_root "$r"
mkdir -p "$r/usr/src/nvidia-fs-2.26.6"
echo 'PACKAGE_NAME="nvidia-fs"' >"$r/usr/src/nvidia-fs-2.26.6/dkms.conf"
rebuild "$r"
has rb-removed-says-gone "nvidia-peer-memory: warning: not rebuilt for $K: "
has rb-removed-says-install "no module of $K exports it; install the NVIDIA driver's kernel modules for $K (Debian: nvidia-kernel-dkms"
has rb-removed-says-back "the installed module stays as it was built; it loads again once those modules are back"
lacks rb-removed-not-pending "is present but not built"
kept rb-removed-module-kept
out=$(NVPM_SYSROOT=$r sh "$FS" --driver-pending "$K" 2>&1) rc=$?
exit_is rb-removed-not-pending-lookup 1

# --- dkms.conf on these layouts: wait for the exporters, or build --------------
# dkms_conf NAME ROOT ACTION WANT: dkms.conf sourced as DKMS sources it for
# $K in ROOT (a MODVERSIONS kernel); WANT is "BUILD_EXCLUSIVE_KERNEL|
# BUILD_DEPENDS" as it leaves them: ^$ skips the kernel until the exporters
# are installed. In an autoinstall, exporters whose DKMS modules are there
# but not built for $K are coming (DKMS builds them first): it must not
# skip, since DKMS 3.2.2 reads dkms.conf once for the whole autoinstall.
dkms_conf() {
	local got
	mkdir -p "$2/kdir" && echo CONFIG_MODVERSIONS=y >"$2/kdir/.config"
	got=$(NVPM_SYSROOT=$2 bash -c "action=$3 kernelver=$K kernel_source_dir=$2/kdir dkms_tree=$2/var/lib/dkms
		. ./dkms.conf 2>/dev/null; echo \"\${BUILD_EXCLUSIVE_KERNEL:-}|\${BUILD_DEPENDS[*]}\"")
	if [ "$got" = "$4" ]; then ok "$1"; else bad "$1" "got \"$got\", want \"$4\""; fi
}
dkms_conf dkms-conf-autoinstall-ofed-coming "$work/ofed-not-built" autoinstall "|mlnx-ofa_kernel"
dkms_conf dkms-conf-install-ofed-waits "$work/ofed-not-built" install '^$|'
dkms_conf dkms-conf-autoinstall-rdma-missing-waits "$work/not-built" autoinstall '^$|nvidia-current'
dkms_conf dkms-conf-autoinstall-all-there "$work/deb13" autoinstall "|nvidia-current"

finish
[ "$fail" = 0 ]
