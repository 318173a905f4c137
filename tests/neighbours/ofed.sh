# shellcheck shell=bash
# shellcheck disable=SC2016 # scripts for the root in single quotes
# make check-neighbours, MOFED: Debian 13's 6.12 with Debian's
# nvidia-kernel-dkms 550 (deb13-layer.sh), then MOFED's own
# mlnx-ofed-kernel-dkms package, built from its debian/ packaging and
# installed with dpkg, its DKMS building what peer memory needs (a cached
# layer), then ours: the order of a fresh install. Debian's 6.12 image then
# boots MOFED's real ib_core and ib_uverbs, the GPU simulator as the
# driver's stand-in, our DKMS-built module and an HCA played by
# ofed_hca_test (tests/neighbours/hca), which registers memory through
# MOFED's ib_umem_get_peer(). Then MOFED's package removed. Sourced by
# run.sh (its helpers and variables).
# shellcheck disable=SC2154 # pass, fail: tests/lib/check.sh's

# MOFED's kernel source, pinned (ofed-src.sh); no tarball, one SKIP line.
# ofed_tarball REL: sets OFED_TGZ; false (with that line) without it.
ofed_tarball() {
	if ! OFED_TGZ=$(tests/neighbours/ofed-src.sh "$1" 2>&1); then
		case $OFED_TGZ in
		SKIP*) echo "$OFED_TGZ" ;;
		*) bad ofed-source "$OFED_TGZ" ;;
		esac
		return 1
	fi
}
OFED_REL=25.10.1.7.1.1
OFED_DKMS=mlnx-ofed-kernel/25.10.OFED.$OFED_REL
ofed_tarball "$OFED_REL" || return 0

# shellcheck source=tests/neighbours/deb13-layer.sh
[ -n "${LAYER:-}" ] || . tests/neighbours/deb13-layer.sh
LOGS=$REPO/build/logs/neighbours/ofed
mkdir -p "$LOGS"
rm -f "$LOGS"/*.log

# --- the MOFED layer: its DKMS package, built and installed as an admin does ----
# MOFED's dkms.conf builds every module of its --default configure (mlx5,
# ipoib, ..., 30-60 minutes here): ofed-install.sh restricts it to
# mlx_compat, ib_core and ib_uverbs, configured --with-core-mod
# --with-user_access-mod (CONFIG_INFINIBAND_USER_MEM: the peer-memory API
# in ib_uverbs).
OFED_MODULES="compat/mlx_compat drivers/infiniband/core/ib_core drivers/infiniband/core/ib_uverbs"
OFED_CONFIGURE="--with-core-mod --with-user_access-mod"
# ofed_layer REL: OLAYER, MOFED REL's package installed over deb13's driver
# layer, its DKMS build done (cached by key); false when it cannot be made.
ofed_layer() {
	local rel=$1 key r t1 rev=1 # rev: bump when the layer's making changes
	ofed_tarball "$rel" || return 1
	key=$(printf '%s|%s|%s|%s|%s|%s' "$rev" "${LAYER##*/}" "${PKGROOT##*/}" "$(sha256sum "$OFED_TGZ" | cut -c1-64)" \
		"$OFED_MODULES" "$OFED_CONFIGURE" | sha256sum | cut -c1-10)
	OLAYER=$NVPM_CACHE/neighbours/ofed-$rel-$key
	if [ ! -e "$OLAYER/.complete" ]; then
		step "MOFED $rel's mlnx-ofed-kernel-dkms: dpkg-buildpackage, dpkg -i, DKMS builds ib_core and ib_uverbs for $K (about 9 minutes; cached)"
		rm -rf "$OLAYER.tmp"
		r=$OLAYER.tmp/root
		if ! mount_root "$r" "$LAYER/upper:$PKGROOT" "$OLAYER.tmp/upper" "$OLAYER.tmp/work"; then
			bad "ofed-layer-$rel" "overlay mount failed"
			return 1
		fi
		cp /etc/resolv.conf "$r/etc/resolv.conf"
		mkdir -p "$r/build/ofed" && tar -xzf "$OFED_TGZ" -C "$r/build/ofed" && cp tests/neighbours/ofed-install.sh "$r/tmp/"
		t1=$SECONDS
		if inr "$r" sh /tmp/ofed-install.sh /build/ofed "$OFED_MODULES" "$OFED_CONFIGURE" >"$LOGS/layer-ofed-$rel.log" 2>&1; then
			echo "$((SECONDS - t1))" >"$OLAYER.tmp/seconds"
			rm -f "$r/etc/resolv.conf" "$r/tmp/ofed-install.sh"
			umount_root "$r"
			rm -rf "$OLAYER" && mkdir -p "$OLAYER" && mv "$OLAYER.tmp/upper" "$OLAYER.tmp/seconds" "$OLAYER/" &&
				cp "$LOGS/layer-ofed-$rel.log" "$OLAYER/ofed.log" && touch "$OLAYER/.complete" && rm -rf "$OLAYER.tmp"
			step "MOFED $rel layer built in $(cat "$OLAYER/seconds") s"
		else
			umount_root "$r"
			bad "ofed-layer-$rel" "$(tail -n 15 "$LOGS/layer-ofed-$rel.log")"
			return 1
		fi
	fi
	ok "ofed-layer-$rel (cached: $(cat "$OLAYER/seconds") s when built)"
}
ofed_layer "$OFED_REL" || return 0

# --- the run's root ------------------------------------------------------------
run_root "$NVPM_CACHE/neighbours/run-ofed" "$OLAYER/upper:$LAYER/upper:$PKGROOT"
MODS=/lib/modules/$K
DRV=$MODS/updates/dkms/nvidia-current.ko.xz
UVERBS=$MODS/updates/dkms/ib_uverbs.ko.xz
OFA=/usr/src/ofa_kernel/x86_64/$K

# --- what MOFED's DKMS package left, as it is ------------------------------------
step "the real layout of MOFED $OFED_REL's mlnx-ofed-kernel-dkms with DKMS 3.2.2"
inroot "dkms status; find $MODS/updates | sort; ls -l /usr/src /usr/src/ofa_kernel /usr/src/ofa_kernel/x86_64 $OFA/; ls -l /etc/alternatives/ofa_kernel_headers" >"$LOGS/layout.txt" 2>&1
dkms_installed ofed-layout-dkms "$OFED_DKMS"
insh ofed-layout-modules "for m in mlx_compat ib_core ib_uverbs; do test -f $MODS/updates/dkms/\$m.ko.xz; done"
# POST_BUILD copied the headers and the table for this kernel, linked from
# ofa_kernel/<arch>/<kernel>; "default" names one kernel's copy.
insh ofed-layout-headers "test -L $OFA && test -s $OFA/Module.symvers && test -f $OFA/include/linux/compat-2.6.h && test -e /usr/src/ofa_kernel/default"
# What find-symvers.sh reads from ib_uverbs.ko.xz is the table MOFED's build wrote.
insh ofed-crcs-module-equal-table "sh src/scripts/find-symvers.sh --exports $UVERBS '^ib_(un)?register_peer_memory_client\$' | cut -f1,2 | sort >/tmp/ours
	awk -F '\t' '\$2 ~ /^ib_(un)?register_peer_memory_client\$/ { print \$1 \"\t\" \$2 }' $OFA/Module.symvers | sort >/tmp/ofed
	test \$(wc -l </tmp/ours) = 2 && diff /tmp/ours /tmp/ofed"
cp "$ROOT/tmp/ours" "$LOGS/ofed-crcs.txt" 2>/dev/null

# --- ours, last: DKMS builds it at once with both exporters' CRCs ----------------
step "our packages from this tree (build_module.sh, dpkg-buildpackage -b; cargo's crates offline)"
our_packages ofed-packages || return 0
step "dpkg -i our packages: DKMS builds ours against the driver and MOFED's ib_uverbs (carried mode, 3-5 minutes)"
install_ours ofed-ours-installs "$LOGS/install.log"
dkms_installed ofed-ours-installed "nvidia-peer-memory/$V"
ours_make_log "$LOGS/make.log"
check ofed-crcs-from-installed grep -qF "CONFIG_MODVERSIONS=y: CRCs from $DRV $UVERBS" "$LOGS/make.log"
carried_crcs_are ofed-crcs-carried-are-mofeds '^ib_(un)?register_peer_memory_client$' "$UVERBS" 2
carried_crcs_are ofed-crcs-carried-are-drivers '^nvidia_p2p_' "$DRV"
insh ofed-modprobe-resolves-mofed "modprobe -S $K -n -v --ignore-install nvidia_peermem 2>&1 | grep -q 'insmod $UVERBS'"

# --- the simulator as the driver's stand-in, and the HCA ------------------------
sims_as_driver ofed- kernel-6.12.env "/usr/src/${DRIVER_DKMS%/*}-${DRIVER_DKMS#*/}" "$LAYER.p2p-includes.h"
# hca_built NAME: ofed_hca_test for $K in $ROOT, against MOFED's headers and
# table there ($OFA), copied to build/neighbours.
hca_built() {
	step "ofed_hca_test for $K, against MOFED's headers and table ($OFA)"
	if inroot "make -C $MODS/build M=/build/src/tests/neighbours/hca OFA=$OFA KBUILD_EXTRA_SYMBOLS=$OFA/Module.symvers modules" >"$LOGS/hca.log" 2>&1 &&
		cp "$ROOT/build/src/tests/neighbours/hca/ofed_hca_test.ko" build/neighbours/; then
		ok "$1"; else bad "$1" "$(tail -n 15 "$LOGS/hca.log")"; fi
}
hca_built ofed-hca-built

# --- a guest: MOFED's core, the GPU simulator, ours, the HCA --------------------
# mofed_guest NAME [KERNEL_ENV]: Debian's image (kernel-6.12.env's, or
# KERNEL_ENV's) boots the MOFED modules DKMS installed in $ROOT$MODS
# (updates/dkms, as there), the GPU simulator as the driver's stand-in, our
# module, the HCA, and scenario 70 (tests/neighbours/scenarios).
mofed_guest() {
	rm -rf build/neighbours/mofed && mkdir -p build/neighbours/mofed
	cp "$ROOT$MODS"/updates/dkms/{mlx_compat,ib_core,ib_uverbs}.ko.xz build/neighbours/mofed/
	guest "$1" "${2:-kernel-6.12.env}" "build/guest-neighbours-${1%-guest}" GUEST_UPDATES_KO="$(echo build/neighbours/mofed/*.ko.xz)" \
		GUEST_EXTRA_KO="tests/sim/nvidia.ko build/neighbours/ofed_hca_test.ko" GUEST_FILES=tests/sim/mofed_peer_sim.ko \
		GUEST_SCENARIO_DIR=tests/neighbours/scenarios GUEST_SCENARIOS='70-*' GUEST_ENV="GPU_PT_ABI=1.2 BUILT_P2P_ABI=1"
}
step "Debian's $K boots MOFED's ib_core and ib_uverbs with the module DKMS built (70-mofed-core)"
mofed_guest ofed-guest

# --- the doctor agrees with DKMS --------------------------------------------------
doctor ofed-doctor
module_build ofed-doctor OK
check ofed-doctor-names-mofed grep -qF "the RDMA core: $UVERBS" "$LOGS/ofed-doctor.json"

# --- MOFED's package removed: the module stays, the rebuild and the doctor say why -
# Its prerm has DKMS remove MOFED's modules; depmod then indexes the
# kernel's own ib_core, without the peer-memory API; dpkg runs our trigger.
step "dpkg -r mlnx-ofed-kernel-dkms (DKMS removes MOFED's modules; our trigger runs)"
# shellcheck disable=SC2034 # run.sh's exporter_gone reads it
ko_sum=$(inr "$ROOT" sh -c "sha256sum $MODS/updates/dkms/nvidia_peermem.ko*")
inroot "dpkg -r mlnx-ofed-kernel-dkms" >"$LOGS/ofed-removed.log" 2>&1
insh ofed-removed "! dkms status -m ${OFED_DKMS%/*} | grep -q . && ! ls $MODS/updates/dkms/ib_uverbs.ko* 2>/dev/null"
exporter_gone ofed-removed "$LOGS/ofed-removed.log" "the RDMA core" ib_register_peer_memory_client \
	"install the RDMA core with the peer-memory API for $K"

umount_root "$ROOT"

# --- MOFED upgraded: 25.07 -> 25.10, with ours installed ---------------------------
# (part ofed-upgrade, after ofed: its simulators and HCA) 25.07's package, then ours built against its
# ib_uverbs, then 25.10's package installed over it as an admin upgrades:
# its DKMS builds 25.10 in the postinst, and DKMS's post_transaction command
# (our -dkms package's) rebuilds ours after that build; the trigger that
# dpkg runs between the unpack and the postinst must not leave the module
# built against 25.07 alone.
OFED_OLD_REL=25.07.0.9.7.1
if [[ $parts == *" ofed-upgrade "* ]] && ofed_layer "$OFED_OLD_REL"; then
	run_root "$NVPM_CACHE/neighbours/run-ofed-upgrade" "$OLAYER/upper:$LAYER/upper:$PKGROOT"
	insh ofed-upgrade-old-installed "dkms status -m ${OFED_DKMS%/*} | grep -q '^${OFED_DKMS%/*}/25.07.*, $K, x86_64: installed'"
	inroot "sh src/scripts/find-symvers.sh --exports $UVERBS '_peer_memory_client\$' | cut -f1,2 | sort" >"$LOGS/ofed-25.07-crcs.txt" 2>&1
	step "our packages, built against MOFED $OFED_OLD_REL's ib_uverbs"
	our_packages ofed-upgrade-packages || return 0
	install_ours ofed-upgrade-ours-installs "$LOGS/upgrade-ours.log"
	carried_crcs_are ofed-upgrade-crcs-are-25.07s '^ib_(un)?register_peer_memory_client$' "$UVERBS" 2
	step "MOFED $OFED_REL's package installed over $OFED_OLD_REL (dpkg -i; DKMS builds it, then ours: about 10 minutes)"
	mkdir -p "$ROOT/build/ofed" && tar -xzf "$(tests/neighbours/ofed-src.sh "$OFED_REL")" -C "$ROOT/build/ofed" &&
		cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
	if inroot "sh src/tests/neighbours/ofed-install.sh /build/ofed '$OFED_MODULES' '$OFED_CONFIGURE'" >"$LOGS/upgrade.log" 2>&1; then
		ok ofed-upgrade-installs; else bad ofed-upgrade-installs "$(tail -n 15 "$LOGS/upgrade.log")"; fi
	insh ofed-upgrade-new-installed "dkms status -m ${OFED_DKMS%/*} | grep -q '^$OFED_DKMS, $K, x86_64: installed' && ! dkms status -m ${OFED_DKMS%/*} | grep -q 25.07"
	inroot "sh src/scripts/find-symvers.sh --exports $UVERBS '_peer_memory_client\$' | cut -f1,2 | sort" >"$LOGS/ofed-25.10-crcs.txt" 2>&1
	echo "  the peer-memory API's CRCs, MOFED $OFED_OLD_REL then $OFED_REL: $(paste -sd ' ' "$LOGS/ofed-25.07-crcs.txt") | $(paste -sd ' ' "$LOGS/ofed-25.10-crcs.txt")"
	dkms_installed ofed-upgrade-ours-installed "nvidia-peer-memory/$V"
	carried_crcs_are ofed-upgrade-crcs-are-25.10s '^ib_(un)?register_peer_memory_client$' "$UVERBS" 2
	check ofed-upgrade-rebuilt-by-dkms-hook grep -q 'Executing post-transaction command' "$LOGS/upgrade.log"
	doctor ofed-upgrade-doctor
	module_build ofed-upgrade-doctor OK
	step "Debian's $K boots MOFED $OFED_REL's core with the module rebuilt after the upgrade (70-mofed-core)"
	mofed_guest ofed-upgrade-guest
	umount_root "$ROOT"
fi
