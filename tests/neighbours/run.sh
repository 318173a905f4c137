#!/usr/bin/env bash
# make check-neighbours: nvidia_peermem beside its neighbours' real packages,
# installed in the order an admin takes, in parts (NVPM_NEIGHBOURS):
#   deb13.sh: Debian 13's 6.12 (DKMS 3.2.2) and Debian's nvidia-kernel-dkms
#     550 (a cached layer over the packaging root): ours installed before
#     any RDMA core, then the RDMA core (the MOFED simulator, a stand-in),
#     the trigger's rebuild with the real driver's CRCs, a guest beside the
#     GPU simulator built as the driver's stand-in, modprobe and the doctor,
#     then the RDMA core removed and back, and the driver removed;
#   deb12.sh: a Debian 12 root (bookworm, DKMS 3.0.10, rustc-web, bindgen
#     from cargo) with Debian's nvidia-kernel-dkms 535 (cached layers), the
#     RDMA core, then our packages built on that root and installed with
#     apt-get, a guest, modprobe and the doctor; deb12-upgrade: the driver
#     upgraded to Debian 13's 550 with its DKMS, ours rebuilt after it.
# Ends with "NEIGHBOURS-SUMMARY N passed, N failed". Not in make check (cold:
# the driver layer and the package builds); its figures are in
# tests/neighbours/README.md.
# shellcheck source-path=SCRIPTDIR/../..
# shellcheck disable=SC2016 # scripts for the root in single quotes
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
SUITE=neighbours SUMMARY=NEIGHBOURS
# shellcheck source=tests/lib/check.sh
. tests/lib/check.sh
REPO=$PWD
[ "$(id -u)" = 0 ] || die "the neighbours suite needs root (chroot, mounts)"
if [ ! -r "$NVPM_CACHE/kernel.env" ]; then scripts/provision.sh || die "provisioning failed"; fi
enter_private_namespace "$@"
V=$(cat VERSION)

inr() { # ROOT CMD...
	local r=$1
	shift
	chroot "$r" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
		LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive TMPDIR=/tmp "$@"
}
mount_root() { # ROOT LOWER UPPER WORK
	mkdir -p "$1" "$3" "$4"
	mount -t overlay overlay -o "lowerdir=$2,upperdir=$3,workdir=$4" "$1" &&
		mount -t proc proc "$1/proc" && mount -t tmpfs tmpfs "$1/sys" && mount -t tmpfs tmpfs "$1/run"
}
umount_root() { umount "$1/run" "$1/sys" "$1/proc" "$1" 2>/dev/null; }

# Each part sets K (the kernel release), MODS, ROOT (its root, mounted), RUN
# (that root's run directory) and LOGS; these helpers use them.
inroot() { inr "$ROOT" sh -ec "cd /build; $1"; }
insh() { check "$1" inroot "$2"; }
# doctor NAME: the doctor's table and JSON, as $LOGS/NAME.txt and NAME.json.
# It reads the kernel release from procfs: the root's is the host's, so the
# test's is laid over it, and /proc/config.gz (the host's, where it has one)
# by the configuration of the kernel under test.
doctor() {
	printf '%s\n' "$K" >"$RUN/osrelease"
	mount --bind "$RUN/osrelease" "$ROOT/proc/sys/kernel/osrelease"
	if [ -e "$ROOT/proc/config.gz" ]; then
		gzip -c "$ROOT/boot/config-$K" >"$RUN/config.gz" && mount --bind "$RUN/config.gz" "$ROOT/proc/config.gz"
	fi
	inroot "nvidia-peermem-doctor --verbose" >"$LOGS/$1.txt" 2>&1
	inroot "nvidia-peermem-doctor --json" >"$LOGS/$1.json" 2>/dev/null
	umount "$ROOT/proc/config.gz" 2>/dev/null
	umount "$ROOT/proc/sys/kernel/osrelease"
}
# module_build NAME STATUS [SUMMARY FIX]: the doctor's module.build in
# $LOGS/NAME.json has STATUS, and SUMMARY and FIX in its summary and fix.
module_build() {
	check "$1" env JSON="$LOGS/$1.json" STATUS="$2" SUMMARY="${3:-}" FIX="${4:-}" python3 -c "
import json, os
c = {c['id']: c for c in json.load(open(os.environ['JSON']))['checks']}
b = c['module.build']
assert b['status'] == os.environ['STATUS'], b
assert os.environ['SUMMARY'] in b['summary'], b
assert os.environ['FIX'] in (b['fix'] or ''), b
"
}
# exporter_gone NAME LOG WHOSE SYMBOL FIX: after a trigger's rebuild (LOG)
# with WHOSE exporter of SYMBOL gone, the rebuild says which and nothing of
# a failed build, the module stays as built ($ko_sum), and the doctor
# ($LOGS/doctor-NAME.json) fails module.build with FIX, what to install.
exporter_gone() {
	check "$1-says-why" sh -c "grep -qF 'nvidia-peer-memory: warning: not rebuilt for $K: ' '$2' &&
		grep -qF \"$3's ($4): no module of $K exports it\" '$2' && ! grep -q 'does not build' '$2'"
	insh "$1-module-kept" "dkms status -m nvidia-peer-memory -k $K | grep -q ': installed' && test \"\$(sha256sum $MODS/updates/dkms/nvidia_peermem.ko*)\" = '$ko_sum'"
	doctor "doctor-$1"
	module_build "doctor-$1" FAIL "imports $4 from $3, and no module installed for $K exports it" "$5"
}

# NVPM_NEIGHBOURS: the parts to run (default all): deb13, deb12, and
# deb12-upgrade (deb12's driver upgraded 535 -> 550; needs deb12).
parts=" ${NVPM_NEIGHBOURS:-deb13 deb12 deb12-upgrade} "
if [[ $parts == *" deb13 "* ]]; then
	# shellcheck source=tests/neighbours/deb13.sh
	. tests/neighbours/deb13.sh
fi
if [[ $parts == *" deb12 "* ]]; then
	# shellcheck source=tests/neighbours/deb12.sh
	. tests/neighbours/deb12.sh
fi
finish
