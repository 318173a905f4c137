# shellcheck shell=bash
# shellcheck disable=SC2016 # scripts for the root in single quotes
# make check-neighbours, Debian 13: sourced by run.sh (its helpers and variables).
# shellcheck source=tests/neighbours/deb13-layer.sh
[ -n "${LAYER:-}" ] || . tests/neighbours/deb13-layer.sh
LOGS=$REPO/build/logs/neighbours
mkdir -p "$LOGS"
rm -f "$LOGS"/*.log

# --- the run's root ------------------------------------------------------------
run_root "$NVPM_CACHE/neighbours/run" "$LAYER/upper:$PKGROOT"
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
our_packages packages || finish
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
sims_as_driver "" kernel-6.12.env "/usr/src/${DRIVER_DKMS%/*}-${DRIVER_DKMS#*/}" "$LAYER.p2p-includes.h"

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
carried_crcs_are crcs-carried-are-drivers '^nvidia_p2p_' "$DRV"

# --- a guest: Debian's 6.12 loads the module built against the real driver ---------
# beside the simulator that carries the driver's CRCs; the load test, symbol
# versions, and the client scenarios on the 1.2 page table of the driver's
# header, which the module's build took too (its banner says 1.x).
step "Debian's $K boots the module DKMS built against the real driver (01, 02, 40, 41; page tables 1.2)"
guest guest kernel-6.12.env build/guest-neighbours GUEST_EXTRA_KO="$(echo tests/sim/*.ko)" \
	GUEST_SCENARIOS='0[12]-* 4[01]-*' GUEST_ENV="GPU_PT_ABI=1.2 BUILT_P2P_ABI=1"

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
