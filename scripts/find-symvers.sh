#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# find-symvers.sh KREL: on a CONFIG_MODVERSIONS kernel, the Module.symvers
# files with the real CRCs of what nvidia_peermem imports from the NVIDIA
# driver (nvidia_p2p_*) and from the RDMA core (ib_register_peer_memory_client
# and ib_unregister_peer_memory_client), looked up where the driver's DKMS
# build or its installer and DOCA-OFED/MLNX_OFED leave them. Prints the two
# paths, driver first, one per line. Exit 1 with what is missing, where it
# looked and what to do; also when a file found has CRCs of 0 (a stub).
#
#   find-symvers.sh --check KREL FILE...   only the check for CRCs of 0
#
# The Makefile runs it when KDIR has CONFIG_MODVERSIONS=y: to find the
# files, or to check those given as NVPM_EXTRA_SYMBOLS. Env: NVPM_SYSROOT
# prefixes every path (tests), NVPM_ARCH replaces `uname -m` (OFED's
# per-arch directory; the Makefile passes the one of KDIR's .config).
set -eu

CHECK_ONLY=
[ "${1:-}" != --check ] || { CHECK_ONLY=1; shift; }
KREL=${1:?usage: find-symvers.sh [--check] KREL [FILE...]}
shift
root=${NVPM_SYSROOT:-}
arch=${NVPM_ARCH:-$(uname -m)}

# Whether $1 is a Module.symvers that exports $2.
exports() { [ -f "$1" ] && awk -v s="$2" '$2 == s { found = 1 } END { exit !found }' "$1"; }

# The first of the remaining arguments that exports $1.
first_exporting() {
	sym=$1
	shift
	for f in "$@"; do
		if exports "$f" "$sym"; then
			echo "$f"
			return 0
		fi
	done
	return 1
}

# DKMS keeps the tree of its last build of a module version; it serves only
# if that build was for KREL (its make.log names the kernel).
dkms_builds() { # $1 = DKMS module name
	find "$root/var/lib/dkms/$1" -mindepth 2 -maxdepth 2 -name build -type d 2>/dev/null | sort -rV | while read -r d; do
		if grep -qsF "$KREL" "$d/make.log"; then echo "$d/Module.symvers"; fi
	done
}

# A stub (CRCs 0) would build a module the kernel refuses.
check_crcs() {
	for f in "$@"; do
		[ -f "$f" ] || { echo "find-symvers: $f: no such file" >&2; exit 1; }
		if awk '($2 ~ /^nvidia_p2p_/ || $2 ~ /_peer_memory_client$/) && $1 ~ /^0x0+$/ { bad = 1 } END { exit !bad }' "$f"; then
			echo "find-symvers: $f has CRCs of 0: it is not from a CONFIG_MODVERSIONS build for $KREL; rebuild the package it belongs to for $KREL" >&2
			exit 1
		fi
	done
}
if [ -n "$CHECK_ONLY" ]; then
	check_crcs "$@"
	exit 0
fi

driver_places="$(dkms_builds nvidia) $(find "$root/usr/src" -mindepth 2 -maxdepth 2 -path '*/nvidia-*/Module.symvers' 2>/dev/null | sort -rV)"
ofed_places="$root/usr/src/ofa_kernel/$arch/$KREL/Module.symvers $root/usr/src/ofa_kernel/$KREL/Module.symvers \
$root/usr/src/ofa_kernel/default/Module.symvers $(dkms_builds mlnx-ofed-kernel)"

missing=
# shellcheck disable=SC2086 # the place lists are words
driver=$(first_exporting nvidia_p2p_get_pages $driver_places) || missing="$missing
  the NVIDIA driver's (nvidia_p2p_*): looked in $root/var/lib/dkms/nvidia/*/build (a DKMS build for $KREL) and $root/usr/src/nvidia-*/; install the driver with DKMS for $KREL (or build it there), or name its Module.symvers"
# shellcheck disable=SC2086
ofed=$(first_exporting ib_register_peer_memory_client $ofed_places) || missing="$missing
  the RDMA core's (ib_register_peer_memory_client): looked in $root/usr/src/ofa_kernel/{$arch/$KREL,$KREL,default}/ and $root/var/lib/dkms/mlnx-ofed-kernel/*/build; install DOCA-OFED or MLNX_OFED's kernel sources for $KREL (mlnx-ofed-kernel-dkms, or its -source package), or name its Module.symvers"
if [ -n "$missing" ]; then
	echo "find-symvers: $KREL has CONFIG_MODVERSIONS=y, so nvidia_peermem must carry the real CRCs of its imports; no Module.symvers found for:$missing
  then: make NVPM_EXTRA_SYMBOLS=\"<driver's Module.symvers> <OFED's Module.symvers>\"" >&2
	exit 1
fi

check_crcs "$driver" "$ofed"
echo "$driver"
echo "$ofed"
