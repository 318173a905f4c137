# shellcheck shell=bash
# shellcheck disable=SC2016 # scripts for the root in single quotes
# make check-neighbours, Debian 13: sourced by run.sh (its helpers and variables).
step "the packaging root (cached; tests/packaging/root.sh)"
PKGROOT=$(tests/packaging/root.sh) || die "tests/packaging/root.sh failed"
step "Debian 13's 6.12 (scripts/provision-carried.sh 6.12, cached)"
if [ ! -r "$NVPM_CACHE/kernel-6.12.env" ]; then
	KSERIES=6.12 scripts/provision-carried.sh 6.12 >/dev/null || die "provisioning Debian's 6.12 failed"
fi
# shellcheck source=/dev/null disable=SC2153 # KREL, KPKGVER, CHROOT, KROOT: the file's
read -r K KPKG DEBS <<<"$(. "$NVPM_CACHE/kernel-6.12.env" && echo "$KREL $KPKGVER $CHROOT$KROOT/debs")"

# The driver's packages, pinned (Debian 13's), as a compute node has them:
# the kernel modules through DKMS, nvidia-smi, and libcuda1, whose
# glx-alternative-nvidia "cuda only" alternative links
# /etc/modprobe.d/nvidia.conf (the driver's modprobe rules: without
# libcuda1 there is none).
DRIVER_PKG=nvidia-kernel-dkms
DRIVER_VER=550.163.01-2
DRIVER_PKGS="$DRIVER_PKG=$DRIVER_VER nvidia-smi=$DRIVER_VER libcuda1=$DRIVER_VER"
DRIVER_DKMS=nvidia-current/550.163.01

LOGS=$REPO/build/logs/neighbours
mkdir -p "$LOGS"
rm -f "$LOGS"/*.log

# --- the driver layer: Debian 13's 6.12 and nvidia-kernel-dkms, DKMS-built ---
# Cached as the overlay's upper directory, a lower layer of each run.
REV=1 # bump when the layer's making changes
key=$(printf '%s|%s|%s|%s|%s' "$REV" "${PKGROOT##*/}" "$K" "$KPKG" "$DRIVER_PKGS" | sha256sum | cut -c1-10)
LAYER=$NVPM_CACHE/neighbours/deb13-driver-$key
if [ ! -e "$LAYER/.complete" ]; then
	step "Debian 13's $K with Debian's $DRIVER_PKGS: DKMS builds the driver (about 7 minutes; cached)"
	rm -rf "$LAYER.tmp" && mkdir -p "$LAYER.tmp/debs"
	cp "$DEBS"/*.deb "$LAYER.tmp/debs/"
	r=$LAYER.tmp/root
	if mount_root "$r" "$PKGROOT" "$LAYER.tmp/upper" "$LAYER.tmp/work"; then
		cp /etc/resolv.conf "$r/etc/resolv.conf"
		mkdir -p "$r/tmp/debs" && cp "$LAYER.tmp/debs"/*.deb "$r/tmp/debs/"
		t1=$SECONDS
		# shellcheck disable=SC2086 # DRIVER_PKGS is a list of words
		# The driver is in non-free (its firmware in non-free-firmware). The
		# root's 7.3 headers go: the driver (550) does not build for 7.3.
		if inr "$r" sh -ec 'sed -i "s/ main\$/ main contrib non-free non-free-firmware/" /etc/apt/sources.list
			apt-get update -qq
			dpkg --purge linux-headers-$(sed -n "s/^KREL=\"\(.*\)\"/\1/p" /.pkgroot.env)
			apt-get install -y -q --no-install-recommends /tmp/debs/*.deb
			rm -rf /tmp/debs' >"$LOGS/layer-kernel.log" 2>&1 &&
			inr "$r" apt-get install -y -q --no-install-recommends $DRIVER_PKGS >"$LOGS/layer-driver.log" 2>&1; then
			echo "$((SECONDS - t1))" >"$LAYER.tmp/seconds"
			rm -f "$r/etc/resolv.conf"
			umount_root "$r"
			rm -rf "$LAYER" && mkdir -p "$LAYER" && mv "$LAYER.tmp/upper" "$LAYER.tmp/seconds" "$LAYER/" &&
				cp "$LOGS/layer-driver.log" "$LAYER/driver.log" && touch "$LAYER/.complete" && rm -rf "$LAYER.tmp"
			step "driver layer built in $(cat "$LAYER/seconds") s"
		else
			umount_root "$r"
			bad driver-layer "see $LOGS/layer-kernel.log, $LOGS/layer-driver.log"
			finish
		fi
	else
		bad driver-layer "overlay mount failed"
		finish
	fi
fi
ok "driver-layer (cached: $(cat "$LAYER/seconds") s when built)"

# --- the run's root ------------------------------------------------------------
RUN=$NVPM_CACHE/neighbours/run
ROOT=$RUN/root
umount_root "$ROOT"
rm -rf "$RUN/upper" "$RUN/work"
mount_root "$ROOT" "$LAYER/upper:$PKGROOT" "$RUN/upper" "$RUN/work" || die "overlay mount failed"
mkdir -p "$ROOT/build/src"
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$ROOT/build/src"
MODS=/lib/modules/$K
DRV=$MODS/updates/dkms/nvidia-current.ko.xz

# --- what Debian's driver package left, as it is -------------------------------
step "the real layout of $DRIVER_PKG $DRIVER_VER with DKMS 3.2.2"
inroot "dkms status; find /var/lib/dkms -maxdepth 6 | sort; find $MODS/updates | sort; ls /usr/src; ls -l /etc/modprobe.d/" >"$LOGS/layout.txt" 2>&1
insh layout-dkms-name "dkms status -m nvidia-current | grep -q '^$DRIVER_DKMS, $K, x86_64: installed' && test ! -e /var/lib/dkms/nvidia"
insh layout-driver-module "test -f $DRV && test -f $MODS/updates/dkms/nvidia-current-peermem.ko.xz"
insh layout-no-build-dir "test ! -e /var/lib/dkms/$DRIVER_DKMS/build"
TABLE=/var/lib/dkms/$DRIVER_DKMS/$K/x86_64/module/Module.symvers
insh layout-table-kept "test -s $TABLE"
# What find-symvers.sh reads from the module is the table DKMS kept of the
# same build, symbol for symbol.
insh crcs-module-equal-dkms-table "sh src/scripts/find-symvers.sh --exports $DRV '^nvidia_p2p_' | cut -f1,2,4 | sort >/tmp/ours
	awk -F '\t' '\$2 ~ /^nvidia_p2p_/ { print \$1 \"\t\" \$2 \"\t\" \$4 }' $TABLE | sort >/tmp/dkms
	test \$(wc -l </tmp/ours) -ge 8 && diff /tmp/ours /tmp/dkms"
cp "$ROOT/tmp/ours" "$LOGS/driver-crcs.txt" 2>/dev/null

# --- our packages, before any RDMA core with the peer-memory API ------------------
step "our packages from this tree (build_module.sh, dpkg-buildpackage -b; cargo's crates offline)"
if ! CARGO_HOME=$RUN/cargo-home cargo fetch --locked >"$LOGS/crates.log" 2>&1 ||
	! kbuild/carried-source.sh build/carried-src >"$LOGS/carried-src.log" 2>&1; then
	bad packages "cargo fetch or carried-source.sh failed (logs in $LOGS)"
	finish
fi
cp -pR build/carried-src "$ROOT/build/src/carried-src"
mkdir -p "$ROOT/root/.cargo" && cp -a "$RUN/cargo-home/registry" "$ROOT/root/.cargo/"
printf '[net]\noffline = true\n' >"$ROOT/root/.cargo/config.toml"
if inroot "cd src && ./build_module.sh --out /build/out && rm -rf /root/.cargo && mkdir -p /build/deb && cd /build/deb &&
	tar -xzf ../out/nvidia-peer-memory_$V.orig.tar.gz && cp -r ../src/debian nvidia-peer-memory-$V/ &&
	cd nvidia-peer-memory-$V && dpkg-buildpackage -us -uc -b" >"$LOGS/packages.log" 2>&1; then ok packages; else
	bad packages "see $LOGS/packages.log"
	finish
fi
step "dpkg -i our packages: 6.12 has MODVERSIONS and no RDMA core with the peer-memory API yet"
if inroot "dpkg -i deb/nvidia-peer-memory-dkms_${V}-1_all.deb deb/nvidia-peer-memory_${V}-1_amd64.deb" >"$LOGS/ours-first.log" 2>&1; then
	ok ours-first-installs; else bad ours-first-installs "see $LOGS/ours-first.log"; fi
insh ours-first-configured "dpkg-query -W -f '\${Status}' nvidia-peer-memory-dkms | grep -qx 'install ok installed'"
insh ours-first-skipped "dkms status -m nvidia-peer-memory | grep -q '^nvidia-peer-memory/$V: added' && ! dkms status -m nvidia-peer-memory -k $K | grep -q installed"
check ours-first-says-why sh -c "grep -q 'nvidia-peer-memory: not built for $K yet, it is built when the modules it imports from are installed: ' '$LOGS/ours-first.log' &&
	grep -qF \"the RDMA core's (ib_register_peer_memory_client): no module of $K exports it; $K's RDMA core ($MODS/kernel/drivers/infiniband/core/ib_\" '$LOGS/ours-first.log'"
check ours-first-driver-found sh -c "! grep -q \"the NVIDIA driver's (nvidia_p2p_get_pages)\" '$LOGS/ours-first.log'"

# --- the simulators for 6.12, the GPU's as this driver's stand-in ------------------
# The real nvidia.ko cannot load without a GPU: the guest keeps the GPU
# simulator, built from the installed driver's own nv-p2p.h (page-table ABI
# 1.2), with the kernel headers its nv-p2p.c includes itself
# (driver-includes.sh; cached beside the layer) and its export type, so that
# its CRCs are the driver's and a module built against the driver loads
# beside it.
DRV_SRC=/usr/src/${DRIVER_DKMS%/*}-${DRIVER_DKMS#*/}
SIMIN=$REPO/build/neighbours
INCS=$LAYER.p2p-includes.h
mkdir -p "$SIMIN"
if [ ! -s "$INCS" ]; then
	step "the kernel headers $DRV_SRC/nvidia/nv-p2p.c includes (the driver's conftest, then gcc -H: about 2 minutes; cached)"
	if inroot "sh src/tests/neighbours/driver-includes.sh $DRV_SRC $K /tmp/p2p-includes.h" >"$LOGS/driver-includes.log" 2>&1; then
		cp "$ROOT/tmp/p2p-includes.h" "$INCS.tmp" && mv "$INCS.tmp" "$INCS"
	fi
fi
if [ -s "$INCS" ]; then ok "driver-includes ($(wc -l <"$INCS") kernel headers)"; else bad driver-includes "see $LOGS/driver-includes.log"; fi
rm -f "$SIMIN/p2p-includes.h" && cp "$INCS" "$SIMIN/p2p-includes.h" 2>/dev/null
cp "$ROOT$DRV_SRC/nvidia/nv-p2p.h" "$SIMIN/nv-p2p.h"
DRV_EXPORT=$(inroot "sh src/scripts/find-symvers.sh --exports $DRV '^nvidia_p2p_get_pages\$'" | cut -f4)
step "the simulators for $K: the GPU's from $DRV_SRC/nvidia/nv-p2p.h, exported with $DRV_EXPORT"
rm -f tests/sim/Module.symvers
if env -u NVPM_IN_NS NVPM_KERNEL_ENV=kernel-6.12.env scripts/in-chroot.sh sh -c 'make --no-print-directory KDIR="$KDIR" KMAKE_FLAGS="$KMAKE_FLAGS" \
	NVPM_SIM_NV_P2P_H=/src/build/neighbours/nv-p2p.h NVPM_SIM_KERNEL_INCLUDES=/src/build/neighbours/p2p-includes.h NVPM_SIM_EXPORT="$1" sims' \
	sh "$DRV_EXPORT" >"$LOGS/sims.log" 2>&1; then ok sims-built; else bad sims-built "see $LOGS/sims.log"; fi
# Symbol, CRC and export type, side by side: the driver's and the simulator's.
inroot "sh src/scripts/find-symvers.sh --exports $DRV '^nvidia_p2p_' | awk -F '\t' '{ print \$2, \$1, \$4 }' | sort" >"$LOGS/crcs-driver.txt" 2>&1
awk -F '\t' '$2 ~ /^nvidia_p2p_/ { print $2, $1, $4 }' tests/sim/Module.symvers | sort >"$LOGS/crcs-sim.txt"
join -a 1 "$LOGS/crcs-driver.txt" "$LOGS/crcs-sim.txt" >"$LOGS/crcs-side-by-side.txt"
check sim-crcs-are-drivers awk -v n="$(wc -l <"$LOGS/crcs-sim.txt")" '
	NF != 5 { next } { both++ } $2 != $4 || $3 != $5 { print "differs: " $0; bad = 1 }
	END { if (both < 8 || both != n) { print both " of the simulator'"'"'s " n " exports are the driver'"'"'s"; bad = 1 } exit bad }' "$LOGS/crcs-side-by-side.txt"

# --- the RDMA core arrives: its trigger builds ours with the driver's CRCs ----------
step "the RDMA core's modules for $K (the MOFED simulator, a stand-in), then the trigger's dkms-rebuild (carried mode, 3-5 minutes)"
if cp tests/sim/mofed_peer_sim.ko "$ROOT$MODS/updates/dkms/" && inr "$ROOT" depmod "$K"; then
	ok rdma-core-installed; else bad rdma-core-installed "see $LOGS/sims.log"; fi
if inroot "/usr/lib/nvidia-peer-memory/dkms-rebuild" >"$LOGS/rebuild.log" 2>&1 &&
	grep -q "building nvidia-peer-memory $V for $K (the modules it imports from are installed now)" "$LOGS/rebuild.log"; then
	ok rebuild-builds; else bad rebuild-builds "$(tail -n 20 "$LOGS/rebuild.log")"; fi
inroot "cat /var/lib/dkms/nvidia-peer-memory/$V/$K/x86_64/log/make.log" >"$LOGS/make.log" 2>&1
insh ours-installed "dkms status -m nvidia-peer-memory -k $K | grep -q '^nvidia-peer-memory/$V, $K, x86_64: installed'"
check crcs-from-installed grep -qF "CONFIG_MODVERSIONS=y: CRCs from $DRV $MODS/updates/dkms/mofed_peer_sim.ko" "$LOGS/make.log"
check crcs-driver-version grep -qF "(nvidia 550.163.01, exports nvidia_p2p_get_pages for $K)" "$LOGS/make.log"
# Every nvidia_p2p_* CRC the module carries is the real driver's.
insh crcs-carried-are-drivers "f=\$(ls $MODS/updates/dkms/nvidia_peermem.ko*) && xz -dc \$f >/tmp/ours.ko &&
	modprobe --dump-modversions /tmp/ours.ko | awk '\$2 ~ /^nvidia_p2p_/ { print \$2, tolower(\$1) }' | sort >/tmp/carried
	sh src/scripts/find-symvers.sh --exports $DRV '^nvidia_p2p_' | awk '{ print \$2, tolower(\$1) }' | sort >/tmp/driver
	test \$(wc -l </tmp/carried) -ge 5 && test \$(join /tmp/carried /tmp/driver | wc -l) = \$(wc -l </tmp/carried) &&
	join /tmp/carried /tmp/driver | awk '\$2 != \$3 { print; bad = 1 } END { exit bad }'"

# --- a guest: Debian's 6.12 loads the module built against the real driver ---------
# beside the simulator that carries the driver's CRCs; the load test, symbol
# versions, and the client scenarios on the 1.2 page table of the driver's
# header, which the module's build took too (its banner says 1.x).
step "Debian's $K boots the module DKMS built against the real driver (01, 02, 40, 41; page tables 1.2)"
if inr "$ROOT" sh -c "xz -dc \$(ls $MODS/updates/dkms/nvidia_peermem.ko*)" >"$SIMIN/nvidia_peermem.ko" 2>"$LOGS/guest.log"; then
	GUEST_PEERMEM_KO=build/neighbours/nvidia_peermem.ko GUEST_EXTRA_KO="$(echo tests/sim/*.ko)" \
		GUEST_SCENARIOS='0[12]-* 4[01]-*' GUEST_ENV="GPU_PT_ABI=1.2 BUILT_P2P_ABI=1" GUEST_OUT=build/guest-neighbours \
		env -u NVPM_IN_NS NVPM_KERNEL_ENV=kernel-6.12.env scripts/in-chroot.sh tests/guest/run.sh >"$LOGS/guest.log" 2>&1
	grep -E '^  (FAIL|SKIP) ' "$LOGS/guest.log" | sed 's/^/  guest:/'
	summary=$(grep '^GUEST-SUMMARY ' "$LOGS/guest.log")
	if [[ $summary =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
		pass=$((pass + BASH_REMATCH[1])) fail=$((fail + BASH_REMATCH[2]))
		echo "  guest on $K: ${BASH_REMATCH[1]} passed, ${BASH_REMATCH[2]} failed (log $LOGS/guest.log)"
	else
		bad guest "no guest summary, see $LOGS/guest.log"
	fi
else
	bad guest "no nvidia_peermem.ko for $K in the root"
fi

# --- modprobe loads ours, not the driver package's own peermem ---------------------
# Debian's nvidia-kernel-support routes nvidia-peermem to nvidia-current-peermem
# (an install rule); ours is read first (00-nvidia-peer-memory.conf).
insh modprobe-rule-debian "modprobe -c | grep -q '^install nvidia_peermem .*nvidia-current-peermem'"
insh modprobe-rule-ours-first "modprobe -c | grep '^install nvidia_peermem ' | head -n 1 | grep -q -- '--ignore-install nvidia_peermem'"
insh modprobe-loads-ours "modprobe -S $K -n -v --ignore-install nvidia_peermem 2>&1 | tee /dev/stderr | grep -q 'insmod $MODS/updates/dkms/nvidia_peermem.ko'"

# --- the doctor agrees with DKMS --------------------------------------------------
doctor doctor
check doctor-build-matches python3 -c "
import json, sys
c = {c['id']: c for c in json.load(open('$LOGS/doctor.json'))['checks']}
b = c['module.build']
assert b['status'] == 'OK', b
assert '$DRV (nvidia 550.163.01): ' in b['detail'], b['detail']
assert 'the RDMA core: $MODS/updates/dkms/mofed_peer_sim.ko' in b['detail'], b['detail']
"
# Debian's routing rule is there, and shadowed by ours: not a conflict.
check doctor-modprobe-shadowed python3 -c "
import json, sys
c = {c['id']: c for c in json.load(open('$LOGS/doctor.json'))['checks']}
m = c['conflict.modprobe']
assert m['status'] == 'INFO' and 'its install rule is shadowed by /usr/lib/modprobe.d/00-nvidia-peer-memory.conf' in m['detail'], m
"

# --- OFED removed: the module stays, the rebuild and the doctor say why ------------
# MOFED's package removed: its modules go (the stand-in's here), depmod
# indexes the kernel's own ib_core, which lacks the peer-memory API, and
# the package's trigger runs dkms-rebuild. No build can carry the CRCs of
# an RDMA core that is not there: the installed module stays as built.
step "the RDMA core removed (its modules gone for $K), then the trigger's dkms-rebuild"
# shellcheck disable=SC2034 # run.sh's exporter_gone reads it
ko_sum=$(inr "$ROOT" sh -c "sha256sum $MODS/updates/dkms/nvidia_peermem.ko*")
if rm "$ROOT$MODS/updates/dkms/mofed_peer_sim.ko" && inr "$ROOT" depmod "$K"; then ok ofed-removed; else bad ofed-removed "cannot remove $MODS/updates/dkms/mofed_peer_sim.ko"; fi
inroot "/usr/lib/nvidia-peer-memory/dkms-rebuild" >"$LOGS/ofed-removed.log" 2>&1
# The trigger fires again (another package): nothing more to say.
inroot "/usr/lib/nvidia-peer-memory/dkms-rebuild" >"$LOGS/ofed-removed-again.log" 2>&1
check ofed-removed-once sh -c "! grep -q . '$LOGS/ofed-removed-again.log'"
exporter_gone ofed-removed "$LOGS/ofed-removed.log" "the RDMA core" ib_register_peer_memory_client \
	"install the RDMA core with the peer-memory API for $K"

# --- OFED back, then the driver's package removed as an admin removes it ---------
# The same modules back: the module matches them again, nothing to rebuild.
# Then apt-get removes nvidia-kernel-dkms (its prerm has DKMS remove the
# driver's modules), and dpkg runs our trigger for the files it took away.
step "the RDMA core back, then apt-get remove $DRIVER_PKG (DKMS removes the driver's modules; our trigger runs)"
if cp tests/sim/mofed_peer_sim.ko "$ROOT$MODS/updates/dkms/" && inr "$ROOT" depmod "$K"; then ok ofed-back; else bad ofed-back "cannot put back mofed_peer_sim.ko"; fi
inroot "/usr/lib/nvidia-peer-memory/dkms-rebuild" >"$LOGS/ofed-back.log" 2>&1
check ofed-back-nothing-to-rebuild sh -c "! grep -q . '$LOGS/ofed-back.log'"
doctor doctor-ofed-back
module_build doctor-ofed-back OK
inroot "apt-get remove -y -q $DRIVER_PKG" >"$LOGS/driver-removed.log" 2>&1
insh driver-removed "! dpkg-query -W -f '\${Status}' $DRIVER_PKG 2>/dev/null | grep -q 'install ok installed' && ! ls $MODS/updates/dkms/nvidia-current.ko* 2>/dev/null"
exporter_gone driver-removed "$LOGS/driver-removed.log" "the NVIDIA driver" nvidia_p2p_get_pages "install the NVIDIA driver"

umount_root "$ROOT"
