# shellcheck shell=bash
# shellcheck disable=SC2016 # scripts for the root in single quotes
# make check-neighbours, part order (after ofed: its HCA and functions):
# ours first, then the driver, then MOFED, on Debian 13's 6.12 (the
# packaging root with Debian's 6.12 kernel packages, nothing cached beyond
# that: each step is the admin's). The driver: Debian's open flavour
# first (nvidia-open-kernel-dkms), whose DKMS build fails for this kernel,
# then the proprietary one in its place. Ours waits for its exporters; the
# driver's DKMS build and then MOFED's run DKMS's post_transaction command,
# which builds ours once both are there. Sourced by run.sh.
# shellcheck disable=SC2154 # pass, fail: tests/lib/check.sh's

LOGS=$REPO/build/logs/neighbours/order
mkdir -p "$LOGS"
rm -f "$LOGS"/*.log
run_root "$NVPM_CACHE/neighbours/run-order" "$PKGROOT"
mkdir -p "$ROOT/tmp/debs"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
cp "$DEBS"/*.deb "$ROOT/tmp/debs/"

step "order: Debian 13's $K installed, then our packages first (no exporter yet)"
if inroot 'sed -i "s/ main\$/ main contrib non-free non-free-firmware/" /etc/apt/sources.list
	apt-get update -qq
	dpkg --purge linux-headers-$(sed -n "s/^KREL=\"\(.*\)\"/\1/p" /.pkgroot.env)
	apt-get install -y -q --no-install-recommends /tmp/debs/*.deb
	rm -rf /tmp/debs' >"$LOGS/kernel.log" 2>&1; then ok order-kernel; else bad order-kernel "$(tail -n 15 "$LOGS/kernel.log")"; fi
our_packages order-packages || return 0
install_ours order-ours-installs "$LOGS/ours.log"
insh order-ours-waits "dkms status -m nvidia-peer-memory | grep -q '^nvidia-peer-memory/$V: added' && ! dkms status -m nvidia-peer-memory -k $K | grep -q installed"

# Debian 13's open flavour first, as an admin with a recent GPU picks it:
# nvidia-open-kernel-dkms 550.163.01-2 does not build for Debian 13's 6.12
# (its nv-pci.c calls pci_resize_resource() with three arguments; 6.12's
# stable updates gave it a fourth, exclude_bars: Debian's 6.12.107, .117
# and .118 have it, and trixie-backports' 550.163.01-4~bpo13+1 calls it the
# same way). Its DKMS build fails and its package stays half-configured;
# ours must go on waiting, with nothing of ours failed.
step "order: then Debian's open flavour (apt-get $OPEN_DRIVER_PKGS): its DKMS build fails for $K; ours still waits"
if inroot "apt-get install -y -q --no-install-recommends $OPEN_DRIVER_PKGS" >"$LOGS/open-driver.log" 2>&1; then
	bad order-open-build-fails "apt-get installed it: see $LOGS/open-driver.log"
else
	inroot "cat /var/lib/dkms/$OPEN_DRIVER_DKMS/build/make.log" >"$LOGS/open-driver-make.log" 2>&1
	check order-open-build-fails grep -q "too few arguments to function .pci_resize_resource." "$LOGS/open-driver-make.log"
fi
insh order-open-not-installed "! ls $MODS/updates/dkms/nvidia-current-open.ko* 2>/dev/null"
insh order-ours-waits-open "! dkms status -m nvidia-peer-memory -k $K | grep -q installed"
check order-open-nothing-of-ours-failed sh -c "! grep -q -e 'warning: not rebuilt' -e 'nvidia-peer-memory.*failed' '$LOGS/open-driver.log' && test ! -e '$ROOT/var/lib/nvidia-peer-memory/inputs/$K.failed'"

# The admin takes the proprietary flavour instead: the open one removed
# (DKMS removes its registration), nvidia-kernel-dkms installed.
step "order: the open flavour removed, the proprietary one installed (apt-get; DKMS builds it, about 4 minutes): ours still waits for the RDMA core"
inroot "apt-get remove -y -q nvidia-open-kernel-dkms" >"$LOGS/open-removed.log" 2>&1
insh order-open-removed "! dkms status -m ${OPEN_DRIVER_DKMS%/*} | grep -q ."
# shellcheck disable=SC2086 # DRIVER_PKGS is a list of words
if inroot "apt-get install -y -q --no-install-recommends $DRIVER_PKGS" >"$LOGS/driver.log" 2>&1; then
	ok order-driver-installs; else bad order-driver-installs "$(tail -n 15 "$LOGS/driver.log")"; fi
dkms_installed order-driver-built "$DRIVER_DKMS"
insh order-ours-still-waits "! dkms status -m nvidia-peer-memory -k $K | grep -q installed"
check order-driver-no-failure sh -c "! grep -q 'warning: not rebuilt' '$LOGS/driver.log' && test ! -e '$ROOT/var/lib/nvidia-peer-memory/inputs/$K.failed'"

step "order: then MOFED $OFED_REL (dpkg -i; DKMS builds it, about 7 minutes, then ours: 3-5 minutes)"
mkdir -p "$ROOT/build/ofed" && tar -xzf "$(tests/neighbours/ofed-src.sh "$OFED_REL")" -C "$ROOT/build/ofed"
if inroot "sh src/tests/neighbours/ofed-install.sh /build/ofed '$OFED_MODULES' '$OFED_CONFIGURE'" >"$LOGS/ofed.log" 2>&1; then
	ok order-ofed-installs; else bad order-ofed-installs "$(tail -n 15 "$LOGS/ofed.log")"; fi
dkms_installed order-ofed-built "$OFED_DKMS"
dkms_installed order-ours-built "nvidia-peer-memory/$V"
check order-built-by-dkms-hook grep -q 'Executing post-transaction command' "$LOGS/ofed.log"
ours_make_log "$LOGS/make.log"
check order-crcs-from-installed grep -qF "CONFIG_MODVERSIONS=y: CRCs from $DRV $UVERBS" "$LOGS/make.log"
carried_crcs_are order-crcs-are-mofeds '^ib_(un)?register_peer_memory_client$' "$UVERBS" 2
carried_crcs_are order-crcs-are-drivers '^nvidia_p2p_' "$DRV"
doctor order-doctor
module_build order-doctor OK
step "order: Debian's $K boots what the three DKMS builds installed (70-mofed-core)"
mofed_guest order-guest
rm -f "$ROOT/etc/resolv.conf"
umount_root "$ROOT"
