# shellcheck shell=bash
# shellcheck disable=SC2016 # scripts for the root in single quotes
# make check-neighbours, part order (after ofed: its simulators, HCA and
# functions): ours first, then the driver, then MOFED, on Debian 13's 6.12
# (the packaging root with Debian's 6.12 kernel packages, nothing cached
# beyond that: each step is the admin's). Ours waits for its exporters;
# the driver's DKMS build and then MOFED's run DKMS's post_transaction
# command, which builds ours once both are there. Sourced by run.sh.
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
if inroot "dpkg -i deb/nvidia-peer-memory-dkms_${V}-1_all.deb deb/nvidia-peer-memory_${V}-1_amd64.deb" >"$LOGS/ours.log" 2>&1; then
	ok order-ours-installs; else bad order-ours-installs "$(tail -n 15 "$LOGS/ours.log")"; fi
insh order-ours-waits "dkms status -m nvidia-peer-memory | grep -q '^nvidia-peer-memory/$V: added' && ! dkms status -m nvidia-peer-memory -k $K | grep -q installed"

# shellcheck disable=SC2086 # DRIVER_PKGS is a list of words
step "order: then the driver (apt-get; DKMS builds it, about 7 minutes): ours still waits for the RDMA core"
if inroot "apt-get install -y -q --no-install-recommends $DRIVER_PKGS" >"$LOGS/driver.log" 2>&1; then
	ok order-driver-installs; else bad order-driver-installs "$(tail -n 15 "$LOGS/driver.log")"; fi
insh order-driver-built "dkms status -m nvidia-current | grep -q '^$DRIVER_DKMS, $K, x86_64: installed'"
insh order-ours-still-waits "! dkms status -m nvidia-peer-memory -k $K | grep -q installed"
check order-driver-no-failure sh -c "! grep -q 'warning: not rebuilt' '$LOGS/driver.log' && test ! -e '$ROOT/var/lib/nvidia-peer-memory/inputs/$K.failed'"

step "order: then MOFED $OFED_REL (dpkg -i; DKMS builds it, about 7 minutes, then ours: 3-5 minutes)"
mkdir -p "$ROOT/build/ofed" && tar -xzf "$(tests/neighbours/ofed-src.sh "$OFED_REL")" -C "$ROOT/build/ofed"
if inroot "sh src/tests/neighbours/ofed-install.sh /build/ofed '$OFED_MODULES' '$OFED_CONFIGURE'" >"$LOGS/ofed.log" 2>&1; then
	ok order-ofed-installs; else bad order-ofed-installs "$(tail -n 15 "$LOGS/ofed.log")"; fi
insh order-ofed-built "dkms status -m ${OFED_DKMS%/*} | grep -q '^$OFED_DKMS, $K, x86_64: installed'"
insh order-ours-built "dkms status -m nvidia-peer-memory -k $K | grep -q '^nvidia-peer-memory/$V, $K, x86_64: installed'"
check order-built-by-dkms-hook grep -q 'Executing post-transaction command' "$LOGS/ofed.log"
inroot "cat /var/lib/dkms/nvidia-peer-memory/$V/$K/x86_64/log/make.log" >"$LOGS/make.log" 2>&1
check order-crcs-from-installed grep -qF "CONFIG_MODVERSIONS=y: CRCs from $DRV $UVERBS" "$LOGS/make.log"
carried_crcs_are order-crcs-are-mofeds '^ib_(un)?register_peer_memory_client$' "$UVERBS" 2
carried_crcs_are order-crcs-are-drivers '^nvidia_p2p_' "$DRV"
doctor order-doctor
module_build order-doctor OK
step "order: Debian's $K boots what the three DKMS builds installed (70-mofed-core)"
mofed_guest order-guest
rm -f "$ROOT/etc/resolv.conf"
umount_root "$ROOT"
