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
#     upgraded to Debian 13's 550 with its DKMS, ours rebuilt after it;
#   ofed.sh: deb13's root and driver, then MOFED's own mlnx-ofed-kernel-dkms
#     (25.10, from $NVPM_OFED_SRC; a cached layer), then ours; a guest with
#     MOFED's real ib_core and ib_uverbs and an HCA (tests/neighbours/hca)
#     registering through MOFED's ib_umem_get_peer(); MOFED's package removed;
#     ofed-upgrade: MOFED 25.07's package, ours, then 25.10's over it;
#   order.sh: ours first, then Debian's driver (its open flavour, whose
#     build fails for 6.12, then the proprietary one), then MOFED 25.10,
#     each installed as an admin does, nothing cached: DKMS builds all three;
#   newkernel.sh: the driver, MOFED 25.10 and ours on 6.12, then another
#     6.12 kernel's packages installed (dpkg -i): DKMS's first autoinstall
#     builds the three for it, ours last; a guest boots that kernel with them.
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
# run_root DIR LOWERS: a part's root, RUN=DIR and ROOT=DIR/root, mounted
# afresh over LOWERS (the overlay's lowerdir), with this tree in
# ROOT/build/src.
run_root() {
	RUN=$1 ROOT=$1/root
	umount_root "$ROOT"
	rm -rf "$RUN/upper" "$RUN/work"
	mount_root "$ROOT" "$2" "$RUN/upper" "$RUN/work" || die "overlay mount failed"
	mkdir -p "$ROOT/build/src"
	git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$ROOT/build/src"
}

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

# install_ours NAME LOG: dpkg -i our two packages in $ROOT (DKMS builds
# ours where the exporters are there); NAME passes when dpkg does.
install_ours() {
	if inroot "dpkg -i deb/nvidia-peer-memory-dkms_${V}-1_all.deb deb/nvidia-peer-memory_${V}-1_amd64.deb" >"$2" 2>&1; then
		ok "$1"; else bad "$1" "$(tail -n 15 "$2")"; fi
}
# dkms_installed NAME MODULE/VERSION [KREL]: DKMS has that build installed
# for KREL ($K).
dkms_installed() {
	local k=${3:-$K}
	insh "$1" "dkms status -m ${2%/*} -k $k | grep -q '^$2, $k, x86_64: installed'"
}
# ours_make_log FILE [KREL]: the make.log of DKMS's build of ours for KREL ($K).
ours_make_log() {
	inroot "cat /var/lib/dkms/nvidia-peer-memory/$V/${2:-$K}/x86_64/log/make.log" >"$1" 2>&1
}

# our_packages NAME: our .debs built in $ROOT from this tree
# (build_module.sh, dpkg-buildpackage -b; cargo's crates copied in, offline),
# in $ROOT/build/deb; NAME passes when they are there.
our_packages() {
	if ! CARGO_HOME=$RUN/cargo-home cargo fetch --locked >"$LOGS/crates.log" 2>&1 ||
		! kbuild/carried-source.sh build/carried-src >"$LOGS/carried-src.log" 2>&1; then
		bad "$1" "cargo fetch or carried-source.sh failed (logs in $LOGS)"
		return 1
	fi
	cp -pR build/carried-src "$ROOT/build/src/carried-src"
	mkdir -p "$ROOT/root/.cargo" && cp -a "$RUN/cargo-home/registry" "$ROOT/root/.cargo/"
	printf '[net]\noffline = true\n' >"$ROOT/root/.cargo/config.toml"
	if inroot "cd src && ./build_module.sh --out /build/out && rm -rf /root/.cargo && mkdir -p /build/deb && cd /build/deb &&
		tar -xzf ../out/nvidia-peer-memory_$V.orig.tar.gz && cp -r ../src/debian nvidia-peer-memory-$V/ &&
		cd nvidia-peer-memory-$V && dpkg-buildpackage -us -uc -b" >"$LOGS/packages.log" 2>&1; then ok "$1"; else
		bad "$1" "$(tail -n 15 "$LOGS/packages.log")"
		return 1
	fi
}

# sims_as_driver PREFIX KERNEL_ENV DRIVER_SRC INCLUDES: the simulators for
# $K in tests/sim, the GPU's as the installed driver's stand-in ($DRV): built
# from the driver's own nv-p2p.h (DRIVER_SRC/nvidia), with the kernel
# headers its nv-p2p.c includes itself (driver-includes.sh, cached in
# INCLUDES) and its export type, so that its CRCs are the driver's: the
# real nvidia.ko cannot load without a GPU. Checks PREFIX-driver-includes,
# PREFIX-sims-built and PREFIX-sim-crcs-are-drivers (the table side by side
# in $LOGS/crcs-side-by-side.txt).
sims_as_driver() {
	local p=$1 kenv=$2 src=$3 incs=$4 export_type simin=$REPO/build/neighbours
	mkdir -p "$simin"
	if [ ! -s "$incs" ]; then
		step "the kernel headers $src/nvidia/nv-p2p.c includes (the driver's conftest, then gcc -H: about 2 minutes; cached)"
		if inroot "sh src/tests/neighbours/driver-includes.sh $src $K /tmp/p2p-includes.h" >"$LOGS/driver-includes.log" 2>&1; then
			cp "$ROOT/tmp/p2p-includes.h" "$incs.tmp" && mv "$incs.tmp" "$incs"
		fi
	fi
	if [ -s "$incs" ]; then ok "${p}driver-includes ($(wc -l <"$incs") kernel headers)"; else bad "${p}driver-includes" "see $LOGS/driver-includes.log"; fi
	rm -f "$simin/p2p-includes.h" && cp "$incs" "$simin/p2p-includes.h" 2>/dev/null
	cp "$ROOT$src/nvidia/nv-p2p.h" "$simin/nv-p2p.h"
	export_type=$(inroot "sh src/scripts/find-symvers.sh --exports $DRV '^nvidia_p2p_get_pages\$'" | cut -f4)
	step "the simulators for $K: the GPU's from $src/nvidia/nv-p2p.h, exported with $export_type"
	rm -f tests/sim/Module.symvers
	if env -u NVPM_IN_NS NVPM_KERNEL_ENV="$kenv" scripts/in-chroot.sh sh -c 'make --no-print-directory KDIR="$KDIR" KMAKE_FLAGS="$KMAKE_FLAGS" \
		NVPM_SIM_NV_P2P_H=/src/build/neighbours/nv-p2p.h NVPM_SIM_KERNEL_INCLUDES=/src/build/neighbours/p2p-includes.h NVPM_SIM_EXPORT="$1" sims' \
		sh "$export_type" >"$LOGS/sims.log" 2>&1; then ok "${p}sims-built"; else bad "${p}sims-built" "see $LOGS/sims.log"; fi
	# Symbol, CRC and export type, side by side: the driver's and the simulator's.
	inroot "sh src/scripts/find-symvers.sh --exports $DRV '^nvidia_p2p_' | awk -F '\t' '{ print \$2, \$1, \$4 }' | sort" >"$LOGS/crcs-driver.txt" 2>&1
	awk -F '\t' '$2 ~ /^nvidia_p2p_/ { print $2, $1, $4 }' tests/sim/Module.symvers | sort >"$LOGS/crcs-sim.txt"
	join -a 1 "$LOGS/crcs-driver.txt" "$LOGS/crcs-sim.txt" >"$LOGS/crcs-side-by-side.txt"
	check "${p}sim-crcs-are-drivers" awk -v n="$(wc -l <"$LOGS/crcs-sim.txt")" '
		NF != 5 { next } { both++ } $2 != $4 || $3 != $5 { print "differs: " $0; bad = 1 }
		END { if (both < 8 || both != n) { print both " of the simulator'"'"'s " n " exports are the driver'"'"'s"; bad = 1 } exit bad }' "$LOGS/crcs-side-by-side.txt"
}

# carried_crcs_are NAME REGEX EXPORTER [MIN]: every CRC of a symbol matching
# REGEX that our installed module carries is the one EXPORTER (a module
# file in $ROOT) exports, and it carries at least MIN (default 5) of them.
carried_crcs_are() {
	insh "$1" "f=\$(ls $MODS/updates/dkms/nvidia_peermem.ko*); case \$f in *.xz) xz -dc \$f >/tmp/ours.ko ;; *) cp \$f /tmp/ours.ko ;; esac
		modprobe --dump-modversions /tmp/ours.ko | awk '\$2 ~ /$2/ { print \$2, tolower(\$1) }' | sort >/tmp/carried
		sh src/scripts/find-symvers.sh --exports $3 '$2' | awk '{ print \$2, tolower(\$1) }' | sort >/tmp/exported
		test \$(wc -l </tmp/carried) -ge ${4:-5} && test \$(join /tmp/carried /tmp/exported | wc -l) = \$(wc -l </tmp/carried) &&
		join /tmp/carried /tmp/exported | awk '\$2 != \$3 { print; bad = 1 } END { exit bad }'"
}

# guest NAME KERNEL_ENV OUT [VAR=VALUE...]: Debian's image boots our module as
# DKMS installed it in $ROOT (tests/guest/run.sh with the VARs), and its
# checks count as this suite's; NAME fails when the guest gives no summary.
guest() {
	local name=$1 kenv=$2 out=$3 summary
	shift 3
	mkdir -p "$REPO/build/neighbours"
	if inr "$ROOT" sh -c "f=\$(ls $MODS/updates/dkms/nvidia_peermem.ko*); case \$f in *.xz) xz -dc \$f ;; *) cat \$f ;; esac" \
		>"$REPO/build/neighbours/nvidia_peermem.ko" 2>"$LOGS/$name.log"; then
		env GUEST_PEERMEM_KO=build/neighbours/nvidia_peermem.ko GUEST_OUT="$out" "$@" \
			env -u NVPM_IN_NS NVPM_KERNEL_ENV="$kenv" scripts/in-chroot.sh tests/guest/run.sh >"$LOGS/$name.log" 2>&1
		grep -E '^  (FAIL|SKIP) ' "$LOGS/$name.log" | sed 's/^/  guest:/'
		summary=$(grep '^GUEST-SUMMARY ' "$LOGS/$name.log")
		if [[ $summary =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
			pass=$((pass + BASH_REMATCH[1])) fail=$((fail + BASH_REMATCH[2]))
			echo "  guest on $K: ${BASH_REMATCH[1]} passed, ${BASH_REMATCH[2]} failed (log $LOGS/$name.log)"
		else
			bad "$name" "no guest summary, see $LOGS/$name.log"
		fi
	else
		bad "$name" "no nvidia_peermem.ko for $K in the root"
	fi
}

# NVPM_NEIGHBOURS: the parts to run (default all): deb13, ofed,
# ofed-upgrade (MOFED 25.07 -> 25.10 with ours installed; needs ofed), order
# (ours, the driver, MOFED; needs ofed), newkernel (another kernel
# installed after all three; needs ofed), deb12, and deb12-upgrade (deb12's
# driver upgraded 535 -> 550; needs deb12).
parts=" ${NVPM_NEIGHBOURS:-deb13 ofed ofed-upgrade order newkernel deb12 deb12-upgrade} "
if [[ $parts == *" deb13 "* ]]; then
	# shellcheck source=tests/neighbours/deb13.sh
	. tests/neighbours/deb13.sh
fi
if [[ $parts == *" ofed "* ]]; then
	# shellcheck source=tests/neighbours/ofed.sh
	. tests/neighbours/ofed.sh
	if [[ $parts == *" order "* ]] && [ -n "${UVERBS:-}" ]; then
		# shellcheck source=tests/neighbours/order.sh
		. tests/neighbours/order.sh
	fi
	if [[ $parts == *" newkernel "* ]] && [ -n "${UVERBS:-}" ]; then
		# shellcheck source=tests/neighbours/newkernel.sh
		. tests/neighbours/newkernel.sh
	fi
fi
if [[ $parts == *" deb12 "* ]]; then
	# shellcheck source=tests/neighbours/deb12.sh
	. tests/neighbours/deb12.sh
fi
finish
