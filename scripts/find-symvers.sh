#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# find-symvers.sh: on a CONFIG_MODVERSIONS kernel, the CRCs nvidia_peermem
# must carry for what it imports from the NVIDIA driver (nvidia_p2p_*) and
# from the RDMA core's peer-memory API (*_peer_memory_client). The only
# right ones are those of the modules that kernel will load: found as
# modprobe finds them (the symbol in modules.symbols, its file in
# modules.dep, so updates/ before the kernel's own), read from the module
# file's CRC table (compressed or not; CRCs stored in __kcrctab* as since
# Linux 5.19, or as absolute symbols before; genksyms and gendwarfksyms
# alike), each checked to be built for KREL (vermagic). So it works with
# every DKMS version (3.0 keeps no Module.symvers, 3.1.3 and later keep one
# per kernel), without DKMS, and with prebuilt module packages, and never
# takes another kernel's or another driver build's files.
#
#   find-symvers.sh KREL OUT            write OUT (Module.symvers lines),
#                                       say on stdout where the CRCs came from
#   find-symvers.sh --sources KREL      the exporters' files, one per line
#   find-symvers.sh --check KREL FILE...  only refuse Module.symvers files
#                                       with CRCs of 0 (NVPM_EXTRA_SYMBOLS)
#   find-symvers.sh --exports FILE [RE]  the CRC table of one module file,
#                                       as Module.symvers lines (RE: awk
#                                       regex on symbols; default all)
#   find-symvers.sh --driver-pending KREL
#                                       the NVIDIA driver's DKMS module
#                                       (name/version) when it is all KREL
#                                       lacks: no module of KREL exports
#                                       the driver's symbols, the RDMA
#                                       core's are found, and the driver's
#                                       DKMS module is there (registered,
#                                       or its source in /usr/src) with no
#                                       build of it for KREL; else exit 1
#   find-symvers.sh --coming KREL       exit 0 when KREL lacks exporters and
#                                       each is a DKMS module DKMS has
#                                       (registered, none installed for
#                                       KREL): an autoinstall builds them
#                                       first; else exit 1
#
# Where an exporter is not installed as a module of KREL (a driver built by
# hand), /etc/nvidia-peer-memory/exporters.conf names it, one line each:
#   driver PATH     the module file or Module.symvers exporting nvidia_p2p_*
#   rdma PATH       the same for ib_register_peer_memory_client
# ({kernel} in PATH stands for KREL). It is not the package's: rebuilds
# keep it.
#
# Exit 1 with what is missing, where it looked and what to install.
# Env: NVPM_SYSROOT prefixes every path (tests). Needs readelf and od;
# xz, zstd or gzip for compressed modules.
set -eu

mode=table
case ${1:-} in
--check) mode=check; shift ;;
--sources) mode=sources; shift ;;
--exports) mode=exports; shift ;;
--driver-pending) mode=pending; shift ;;
--coming) mode=coming; shift ;;
esac
KREL=${1:?usage: find-symvers.sh [--sources|--check|--driver-pending|--coming] KREL [OUT | FILE...]; find-symvers.sh --exports FILE [RE]}
shift
root=${NVPM_SYSROOT:-}
CONF=/etc/nvidia-peer-memory/exporters.conf
moddir=$root/lib/modules/$KREL
me=find-symvers

# What each exporter is known by: the symbol that finds it, and the CRCs
# taken from it (an awk regex on symbol names).
DRIVER_SYM=nvidia_p2p_get_pages
DRIVER_RE='^nvidia_p2p_'
RDMA_SYM=ib_register_peer_memory_client
RDMA_RE='_peer_memory_client$'

tmp=$(mktemp -d "${TMPDIR:-/tmp}/nvpm-symvers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Messages name files as they are on the host ($root is the tests').
fail() {
	echo "$me: $*" | sed "s|$root/|/|g" >&2
	exit 1
}

# --- Module.symvers files given by hand -------------------------------------

# A table with CRCs of 0 for our imports is a stub (abi-symvers.sh, or a
# build without MODVERSIONS): the kernel would refuse the module.
check_table() { # FILE
	[ -f "$1" ] || fail "$1: no such file"
	if awk -v re="$DRIVER_RE|$RDMA_RE" '$2 ~ re && $1 ~ /^0x0+$/ { bad = 1 } END { exit !bad }' "$1"; then
		fail "$1 has CRCs of 0: it is not from a CONFIG_MODVERSIONS build for $KREL; rebuild the package it belongs to for $KREL"
	fi
}
if [ "$mode" = check ]; then
	for f in "$@"; do check_table "$f"; done
	exit 0
fi

# --- module files -----------------------------------------------------------

# The module file as an ELF object: compressed ones unpacked into $tmp.
elf_of() { # FILE -> path
	case $1 in
	*.xz) out=$tmp/$(basename "$1" .xz) && xz -dc "$1" >"$out" ;;
	*.zst) out=$tmp/$(basename "$1" .zst) && zstd -dcq "$1" >"$out" ;;
	*.gz) out=$tmp/$(basename "$1" .gz) && gzip -dc "$1" >"$out" ;;
	*) out=$1 ;;
	esac || fail "$1: cannot decompress it"
	echo "$out"
}

# A .modinfo field of an ELF module ("vermagic", "version", "name").
modinfo_field() { # ELF FIELD
	readelf -p .modinfo "$1" 2>/dev/null | sed -n "s/^ *\[ *[0-9a-f]*\] *$2=//p" | head -n 1
}

# The CRCs a module exports for the symbols matching RE, as Module.symvers
# lines (0xCRC, symbol, module, export type). Each CRC is the symbol
# __crc_<sym>: an absolute symbol whose value is the CRC (before Linux
# 5.19), or a 32-bit word at the symbol's offset in its __kcrctab* section,
# in the file's byte order. The export type: in newer kernels (the
# kernel's "module: use kflagstab instead of *_gpl sections"; Debian's 7.3
# has it, its 6.12 not) a byte at __flags_<sym> in __kflagstab, bit 0 GPL
# only (KSYM_FLAG_GPL_ONLY, include/linux/module_symbol.h); before, the
# section of __ksymtab_<sym> (or of the CRC): *_gpl is EXPORT_SYMBOL_GPL.
ko_exports() { # ELF MODNAME RE
	readelf -hW "$1" >"$tmp/hdr" 2>/dev/null || fail "$1: not an ELF file"
	big=$(grep -c 'big endian' "$tmp/hdr" || :)
	readelf -SW "$1" 2>/dev/null | sed -n 's/^ *\[ *\([0-9][0-9]*\)\] */\1 /p' >"$tmp/sections"
	readelf -sW "$1" 2>/dev/null | awk '$8 ~ /^__(crc|ksymtab|flags)_/ { print $2, $7, $8 }' >"$tmp/syms"
	# "symbol value section-name section-offset" for each __crc_, __ksymtab_
	# and __flags_ symbol.
	awk 'FNR == NR { name[$1] = $2; off[$1] = $5; next }
		{ print $3, $1, ($2 == "ABS" ? "ABS" : name[$2]), ($2 in off ? off[$2] : 0) }' \
		"$tmp/sections" "$tmp/syms" >"$tmp/placed"
	grep '^__crc_' "$tmp/placed" | while read -r symname value sec secoff; do
		sym=${symname#__crc_}
		echo "$sym" | grep -Eq "$3" || continue
		if [ "$sec" = ABS ]; then
			crc=$(printf '%08x' $((0x$value & 0xffffffff)))
		else
			crc=$(od -An -v -tx1 -j $((0x$secoff + 0x$value)) -N 4 "$1" |
				awk -v big="$big" 'NF == 4 { if (big != "0") print $1 $2 $3 $4; else print $4 $3 $2 $1 }')
		fi
		[ -n "$crc" ] || fail "$1: cannot read the CRC of $sym"
		flags=$(awk -v s="__flags_$sym" '$1 == s { print $2, $4; exit }' "$tmp/placed")
		if [ -n "$flags" ]; then
			# "value section-offset" of __flags_<sym>: its byte, bit 0.
			gpl=$(od -An -v -tu1 -j $((0x${flags#* } + 0x${flags% *})) -N 1 "$1" | awk '{ print $1 % 2 }')
			case $gpl in
			1) type=EXPORT_SYMBOL_GPL ;;
			0) type=EXPORT_SYMBOL ;;
			*) fail "$1: cannot read the flags of $sym" ;;
			esac
		else
			ksec=$(awk -v s="__ksymtab_$sym" '$1 == s { print $3 }' "$tmp/placed")
			case ${ksec:-$sec} in
			*_gpl*) type=EXPORT_SYMBOL_GPL ;;
			*) type=EXPORT_SYMBOL ;;
			esac
		fi
		printf '0x%s\t%s\t%s\t%s\t\n' "$crc" "$sym" "$2" "$type"
	done
}

if [ "$mode" = exports ]; then
	elf=$(elf_of "$KREL")
	name=$(modinfo_field "$elf" name)
	ko_exports "$elf" "${name:-$(basename "$KREL" | sed 's/\.ko.*//; s/-/_/g')}" "${1:-.}"
	exit 0
fi

# The module that exports SYM for KREL, as modprobe would load it: the name
# from modules.symbols, the file from modules.dep (depmod already chose
# updates/ over the kernel's own copy).
exporter_file() { # SYM
	name=$(awk -v s="symbol:$1" '$1 == "alias" && $2 == s { print $3; exit }' "$moddir/modules.symbols" 2>/dev/null)
	[ -n "$name" ] || return 1
	awk -F: -v n="$name" '{
		f = $1; b = f; sub(/.*\//, "", b); sub(/\.ko(\.[a-z]+)?$/, "", b); gsub(/-/, "_", b)
		if (b == n) { print f; exit }
	}' "$moddir/modules.dep" | sed "s|^\([^/]\)|$moddir/\1|"
}

# An admin's line in exporters.conf for WHAT (driver, rdma), {kernel} filled.
conf_entry() { # WHAT
	[ -f "$root$CONF" ] || return 1
	p=$(awk -v w="$1" '$1 == w { print $2; exit }' "$root$CONF")
	[ -n "$p" ] || return 1
	echo "$root$p" | sed "s/{kernel}/$KREL/g"
}

# The NVIDIA driver's DKMS module as $dk (name/version), and $dk_how:
# "registered" (DKMS has it: its source linked from /var/lib/dkms), or
# "source": its source unpacked in /usr/src (a dkms.conf beside the
# driver's nv-p2p.h, as the Makefile finds it), not registered yet. dpkg
# runs our trigger there in a driver upgrade: after the old version's
# prerm removed it from DKMS and the new one's unpack, before the new
# one's postinst adds and builds it. False when neither.
driver_dkms() {
	dk='' dk_how=''
	for d in "$root"/var/lib/dkms/nvidia*/*/source; do
		case $d in */nvidia-peer-memory/* | *'*'*) ;; *) dk=${d%/source} dk_how=registered && break ;; esac
	done
	if [ -n "$dk" ]; then
		dk=${dk#"$root"/var/lib/dkms/}
		return 0
	fi
	for c in "$root"/usr/src/nvidia*/dkms.conf; do
		d=${c%/dkms.conf}
		case $d in */nvidia-peer-memory-* | *'*'*) continue ;; esac
		[ -f "$d/nvidia/nv-p2p.h" ] || [ -f "$d/nvidia-peermem/nv-p2p.h" ] || continue
		# DKMS's source directory is NAME-VERSION; dkms.conf names NAME.
		base=${d##*/}
		name=$(sed -n "s/^PACKAGE_NAME=[\"']\{0,1\}\([^\"' ]*\).*/\1/p" "$c" | head -n 1)
		case $base in "$name"-?*) ;; *) name=${base%-*} ;; esac
		dk=$name/${base#"$name"-} dk_how=source
	done
	[ -n "$dk" ]
}

# MOFED's DKMS module (mlnx-ofed-kernel: deb, mlnx-ofa_kernel: rpm), as
# $dk (name/version), where DKMS has one; false when it has none.
ofed_dkms() {
	dk=
	for d in "$root"/var/lib/dkms/mlnx-ofed-kernel/*/source "$root"/var/lib/dkms/mlnx-ofa_kernel/*/source; do
		[ -e "$d" ] && dk=${d%/source} && break
	done
	dk=${dk#"$root"/var/lib/dkms/}
	[ -n "$dk" ]
}

# Why no exporter was found, and what to install.
why_missing_driver() {
	if driver_dkms && [ "$dk_how" = registered ]; then
		echo "DKMS has $dk but no build of it installed for $KREL: dkms autoinstall -k $KREL (needs linux-headers-$KREL), then rebuild nvidia-peer-memory"
	elif [ -n "$dk" ]; then
		echo "the NVIDIA driver's DKMS module $dk is in /usr/src, not yet added to DKMS nor built for $KREL (its package's configuration does both; by hand: dkms install $dk -k $KREL), then rebuild nvidia-peer-memory"
	else
		echo "install the NVIDIA driver's kernel modules for $KREL (Debian: nvidia-kernel-dkms or nvidia-open-kernel-dkms; NVIDIA's repositories: nvidia-dkms-<branch>, kmod-nvidia-open-dkms, or a prebuilt linux-modules-nvidia-<branch>-<flavour> package), or name its module in $CONF"
	fi
}
why_missing_rdma() {
	own=$(awk -F: '$1 ~ /(^|\/)ib_(core|uverbs)\.ko/ { print $1; exit }' "$moddir/modules.dep" 2>/dev/null || :)
	if ofed_dkms; then
		echo "DKMS has $dk but no build of it installed for $KREL: dkms autoinstall -k $KREL (needs linux-headers-$KREL), then rebuild nvidia-peer-memory"
	elif [ -n "$own" ]; then
		echo "$KREL's RDMA core (/lib/modules/$KREL/$own) has no peer-memory API: it is the kernel's own, not DOCA-OFED's or MLNX_OFED's; install their kernel modules for $KREL (deb: mlnx-ofed-kernel-dkms or mlnx-ofed-kernel-modules; rpm: mlnx-ofa_kernel-dkms, kmod-mlnx-ofa_kernel or mlnx-ofa_kernel-modules), or name the module in $CONF"
	else
		echo "install DOCA-OFED's or MLNX_OFED's kernel modules for $KREL (deb: mlnx-ofed-kernel-dkms or mlnx-ofed-kernel-modules; rpm: mlnx-ofa_kernel-dkms, kmod-mlnx-ofa_kernel or mlnx-ofa_kernel-modules), or name the module in $CONF"
	fi
}

# One exporter: its file, and its CRCs appended to $tmp/table. Sets $file
# and $about (what it is, for the provenance line).
resolve() { # WHAT SYM RE
	file='' about='' how=''
	if file=$(conf_entry "$1"); then
		how="named in $CONF"
		[ -f "$file" ] || fail "$CONF names $file for the $1, and there is no such file"
	elif [ ! -f "$moddir/modules.dep" ] || [ ! -f "$moddir/modules.symbols" ]; then
		# No index: no modules at all (not installed for KREL), or depmod not run.
		[ -z "$(find "$moddir" -name '*.ko*' 2>/dev/null | head -n 1)" ] ||
			fail "no module index for $KREL ($moddir/modules.dep, modules.symbols): run depmod $KREL"
		file=
		return 0
	elif ! file=$(exporter_file "$2") || [ -z "$file" ]; then
		file=
		return 0
	else
		how="exports $2 for $KREL"
		[ -f "$file" ] || fail "modules.dep of $KREL names $file for $2, and there is no such file: run depmod $KREL"
	fi
	case $file in
	*.ko | *.ko.*)
		elf=$(elf_of "$file")
		vermagic=$(modinfo_field "$elf" vermagic)
		[ "${vermagic%% *}" = "$KREL" ] ||
			fail "$file ($how) is built for ${vermagic%% *}${vermagic:+, }not for $KREL (vermagic \"$vermagic\"): rebuild it for $KREL"
		# The name the kernel will know it by (Debian's nvidia-current.ko is "nvidia").
		name=$(modinfo_field "$elf" name)
		[ -n "$name" ] || name=$(basename "$file" | sed 's/\.ko.*//; s/-/_/g')
		ko_exports "$elf" "$name" "$3" >"$tmp/one"
		version=$(modinfo_field "$elf" version)
		about="$name${version:+ $version}, $how"
		;;
	*)
		check_table "$file"
		awk -v re="$3" '$2 ~ re' "$file" >"$tmp/one"
		about="Module.symvers, $how"
		;;
	esac
	grep -q "	$2	" "$tmp/one" || fail "$file ($how) has no CRC for $2: is it a build with CONFIG_MODVERSIONS=y?"
	awk '$1 ~ /^0x0+$/ { bad = $2 } END { exit bad != "" }' "$tmp/one" ||
		fail "$file ($how) has CRCs of 0: it is not from a CONFIG_MODVERSIONS build for $KREL"
	cat "$tmp/one" >>"$tmp/table"
}

: >"$tmp/table"
missing=
resolve driver "$DRIVER_SYM" "$DRIVER_RE"
driver=$file driver_about=$about
[ -n "$driver" ] || missing="$missing
  the NVIDIA driver's ($DRIVER_SYM): no module of $KREL exports it; $(why_missing_driver)"
resolve rdma "$RDMA_SYM" "$RDMA_RE"
rdma=$file rdma_about=$about
[ -n "$rdma" ] || missing="$missing
  the RDMA core's ($RDMA_SYM): no module of $KREL exports it; $(why_missing_rdma)"
if [ "$mode" = pending ]; then
	# What KREL lacks is the driver's build that DKMS has still to make.
	[ -z "$driver" ] && [ -n "$rdma" ] && driver_dkms && [ ! -d "$root/var/lib/dkms/$dk/$KREL" ] || exit 1
	echo "$dk"
	exit 0
fi
if [ "$mode" = coming ]; then
	# Every exporter KREL lacks is a DKMS module DKMS has: its autoinstall
	# builds them for KREL before ours (dkms.conf's BUILD_DEPENDS).
	[ -n "$missing" ] || exit 1
	[ -n "$driver" ] || { driver_dkms && [ "$dk_how" = registered ]; } || exit 1
	[ -n "$rdma" ] || ofed_dkms || exit 1
	exit 0
fi
if [ -n "$missing" ]; then
	fail "$KREL has CONFIG_MODVERSIONS=y, so nvidia_peermem must carry the CRCs of the modules it imports from, as that kernel will load them; missing:$missing"
fi

case $mode in
sources)
	echo "$driver"
	echo "$rdma"
	;;
table)
	OUT=${1:?usage: find-symvers.sh KREL OUT}
	cp "$tmp/table" "$OUT"
	echo "nvidia_peermem: CONFIG_MODVERSIONS=y: CRCs from ${driver#"$root"} ${rdma#"$root"}"
	echo "nvidia_peermem:   nvidia_p2p_*: ${driver#"$root"} ($driver_about)"
	echo "nvidia_peermem:   peer memory: ${rdma#"$root"} ($rdma_about)"
	;;
esac
