# shellcheck shell=bash
# shellcheck disable=SC2016 # scripts for the root in single quotes
# make check-neighbours, part newkernel (after ofed: its layers and
# helpers): Debian 13's 6.12 with Debian's driver, MOFED 25.10 and ours
# installed, then another kernel of the series installed (its image and
# headers packages, from Debian's archive). The headers' postinst has
# DKMS's autoinstall build the three for it: MOFED's and the driver's
# before ours (our dkms.conf's BUILD_DEPENDS names the DKMS modules of
# both that DKMS has), ours with that kernel's own exporters' CRCs. Its
# image then boots what the three builds installed. Sourced by run.sh.
# shellcheck disable=SC2154 # pass, fail: tests/lib/check.sh's

# In Debian 13's main suite; $K, the newest, comes from its security suite.
NEW_K=6.12.117+deb13-amd64
LOGS=$REPO/build/logs/neighbours/newkernel
mkdir -p "$LOGS"
rm -f "$LOGS"/*.log
# MOFED 25.10's layer (ofed-upgrade left OLAYER at 25.07's; cached).
ofed_layer "$OFED_REL" || return 0
run_root "$NVPM_CACHE/neighbours/run-newkernel" "$OLAYER/upper:$LAYER/upper:$PKGROOT"
OLD_K=$K MODS=/lib/modules/$K

step "newkernel: ours on $K beside Debian's driver and MOFED $OFED_REL (dpkg -i; DKMS builds it, 3-5 minutes)"
our_packages newkernel-packages || return 0
install_ours newkernel-ours-installs "$LOGS/ours.log"
dkms_installed newkernel-ours-installed "nvidia-peer-memory/$V"
# Our own feature: what our dkms.conf hands DKMS's autoinstall on this root,
# read as DKMS reads it (sourced, with kernelver and action set).
insh newkernel-build-depends "bash -c 'kernelver=$K action=autoinstall kernel_source_dir=$MODS/build
	. /usr/src/nvidia-peer-memory-$V/dkms.conf 2>/dev/null; printf \"%s\n\" \"\${BUILD_DEPENDS[@]}\" | sort | paste -sd \" \"' |
	tee /tmp/build-depends | grep -qx '${OFED_DKMS%/*} ${DRIVER_DKMS%/*}'"
cp "$ROOT/tmp/build-depends" "$LOGS/build-depends.txt" 2>/dev/null

# Installed with dpkg -i (the packages from Debian's archive, with apt-get
# download): MOFED's utils package depends on mlnx-tools, which no Debian
# archive has (ofed-install.sh installs it without), and apt refuses every
# install while a dependency is unmet. dpkg runs the same hooks.
step "newkernel: Debian's $NEW_K image and headers (dpkg -i): DKMS builds MOFED, the driver, then ours for it (about 15 minutes)"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
t1=$SECONDS
if inroot "mkdir -p /tmp/newk && cd /tmp/newk && apt-get download -q -o APT::Sandbox::User=root linux-image-$NEW_K linux-headers-$NEW_K \
		linux-headers-${NEW_K%-amd64}-common linux-kbuild-${NEW_K%-amd64} && dpkg -i ./*.deb" >"$LOGS/kernel.log" 2>&1; then
	ok newkernel-installs; else bad newkernel-installs "$(tail -n 15 "$LOGS/kernel.log")"; fi
rm -rf "$ROOT/etc/resolv.conf" "$ROOT/tmp/newk"
echo "  $NEW_K's packages and the three DKMS builds: $((SECONDS - t1)) s"
K=$NEW_K MODS=/lib/modules/$NEW_K
DRV=$MODS/updates/dkms/nvidia-current.ko.xz UVERBS=$MODS/updates/dkms/ib_uverbs.ko.xz OFA=/usr/src/ofa_kernel/x86_64/$K
dkms_installed newkernel-ofed-built "$OFED_DKMS"
dkms_installed newkernel-driver-built "$DRIVER_DKMS"
dkms_installed newkernel-ours-built "nvidia-peer-memory/$V"
# DKMS's autoinstall says "Autoinstall of module M/V for kernel K": ours
# after both, and never skipped for want of an exporter.
check newkernel-ours-after-both awk -v k="$K" -v o="${OFED_DKMS%/*}/" -v d="${DRIVER_DKMS%/*}/" '
	/^Autoinstall of module / && $7 == k { n++; if (index($4, o) == 1) ofed = n; else if (index($4, d) == 1) drv = n; else if ($4 ~ /^nvidia-peer-memory\//) ours = n }
	END { exit !(ofed && drv && ours > ofed && ours > drv) }' "$LOGS/kernel.log"
check newkernel-ours-not-skipped sh -c "! grep -q -e 'not built for $K yet' -e 'skipped for module(s) nvidia-peer-memory' -e 'missing dependencies' '$LOGS/kernel.log'"
# dpkg runs two autoinstalls (the image's hook and the headers'); the first
# must build all three: the second does not come when only headers arrive,
# and DKMS 3.2.2 runs no post_transaction command after an autoinstall.
check newkernel-first-autoinstall-builds-ours sh -c "grep -m1 '^Autoinstall on $K ' '$LOGS/kernel.log' | grep -q 'succeeded for module(s) .*nvidia-peer-memory'"
ours_make_log "$LOGS/make.log"
check newkernel-crcs-from-its-own grep -qF "CONFIG_MODVERSIONS=y: CRCs from $DRV $UVERBS" "$LOGS/make.log"
carried_crcs_are newkernel-crcs-are-mofeds '^ib_(un)?register_peer_memory_client$' "$UVERBS" 2
carried_crcs_are newkernel-crcs-are-drivers '^nvidia_p2p_' "$DRV"
insh newkernel-modprobe-resolves-mofed "modprobe -S $K -n -v --ignore-install nvidia_peermem 2>&1 | grep -q 'insmod $UVERBS'"
dkms_installed newkernel-old-kernel-kept "nvidia-peer-memory/$V" "$OLD_K"
doctor newkernel-doctor
module_build newkernel-doctor OK

step "newkernel: Debian's $NEW_K for the guest (provision-carried.sh with NVPM_CARRIED_KREL; cached)"
if [ -r "$NVPM_CACHE/kernel-$K.env" ] ||
	NVPM_CARRIED_KREL=$K KSERIES=6.12 scripts/provision-carried.sh 6.12 >"$LOGS/provision.log" 2>&1; then
	ok newkernel-provisioned; else bad newkernel-provisioned "$(tail -n 5 "$LOGS/provision.log")"; fi
sims_as_driver newkernel- "kernel-$K.env" "/usr/src/${DRIVER_DKMS%/*}-${DRIVER_DKMS#*/}" "$LAYER.p2p-includes.h"
hca_built newkernel-hca-built
step "newkernel: Debian's $K boots what the three DKMS builds installed for it (70-mofed-core)"
mofed_guest newkernel-guest "kernel-$K.env"
umount_root "$ROOT"
K=$OLD_K
