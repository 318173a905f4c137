# shellcheck shell=bash
# make check-neighbours, Debian 12: a bookworm root as a Debian 12 host has
# it (DKMS 3.0.10, which keeps no Module.symvers of what it builds), its
# 6.1 headers and image, Debian's nvidia-kernel-dkms 535.309.01 (bookworm-security) built by
# that DKMS, then the RDMA core, then our packages built on that host
# (rustc-web 1.85 and bindgen from cargo, as README says for Debian 12):
# DKMS builds ours with the CRCs read from the installed nvidia-current.ko,
# and Debian's 6.1 image boots it beside the GPU simulator built as that
# driver's stand-in. Sourced by run.sh (its helpers and variables).
# shellcheck disable=SC2154,SC2016 # pass, fail: tests/lib/check.sh's; scripts for the root in single quotes

step "Debian 12's 6.1 (scripts/provision-carried.sh 6.1, cached)"
if [ ! -r "$NVPM_CACHE/kernel-6.1.env" ]; then
	scripts/provision-carried.sh 6.1 >/dev/null || die "provisioning Debian's 6.1 failed"
fi
# shellcheck source=/dev/null disable=SC2153 # KREL, KPKGVER, CHROOT, KROOT: the file's
read -r K KPKG DEBS <<<"$(. "$NVPM_CACHE/kernel-6.1.env" && echo "$KREL $KPKGVER $CHROOT$KROOT/debs")"
LOGS=$REPO/build/logs/neighbours/deb12
mkdir -p "$LOGS"
rm -f "$LOGS"/*.log

# What a Debian 12 host that builds Rust modules without a Rust kernel has
# (rust-toolchain.sh names it): the build tools, DKMS, rustc-web and its
# rust-src, cargo-web (our packages' doctor), libclang; bindgen 0.71.1 is
# not in Debian 12, so cargo installs it (kbuild/carried.pin's minimum),
# trusting what this machine trusts (SSL_CERT_FILE where it is set).
DEB12_PACKAGES="build-essential dkms dh-dkms debhelper dpkg-dev fakeroot kmod xz-utils python3 \
rustc-web rust-web-src cargo-web libclang-dev"
DEB12_BINDGEN=0.71.1
# The driver's packages, pinned (Debian 12's), as a compute node has them.
DRIVER12_PKG=nvidia-kernel-dkms
DRIVER12_VER=535.309.01-0+deb12u1
DRIVER12_PKGS="$DRIVER12_PKG=$DRIVER12_VER nvidia-smi=$DRIVER12_VER libcuda1=$DRIVER12_VER"
DRIVER12_DKMS=nvidia-current/535.309.01

# --- the Debian 12 root: bookworm, its 6.1 image and headers, the toolchain -------
REV=1 # bump when the root's making changes
key=$(printf '%s|%s|%s|%s|%s' "$REV" "$K" "$KPKG" "$DEB12_PACKAGES" "$DEB12_BINDGEN" | sha256sum | cut -c1-10)
ROOT12=$NVPM_CACHE/neighbours/deb12-root-$key
if [ ! -e "$ROOT12/.complete" ]; then
	step "Debian 12's root: debootstrap bookworm, its $K, DKMS 3.0.10, rustc-web; cargo builds bindgen $DEB12_BINDGEN (about 12 minutes; cached)"
	rm -rf "$ROOT12" "$ROOT12.tmp"
	t1=$SECONDS
	# shellcheck disable=SC2086 # DEB12_PACKAGES is a list of words
	if (debootstrap_debian bookworm "main contrib non-free non-free-firmware" "$ROOT12.tmp" "$LOGS/root-debootstrap.log" \
		"debootstrap bookworm") >"$LOGS/root.log" 2>&1 &&
		mkdir -p "$ROOT12.tmp/tmp/debs" && cp "$DEBS"/*.deb "$ROOT12.tmp/tmp/debs/" &&
		mount -t proc proc "$ROOT12.tmp/proc" &&
		cp "${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}" "$ROOT12.tmp/tmp/ca.crt" &&
		inr "$ROOT12.tmp" sh -ec "apt-get update -qq
		apt-get install -y -q --no-install-recommends $DEB12_PACKAGES /tmp/debs/*.deb
		rm -rf /tmp/debs
		CARGO_HTTP_CAINFO=/tmp/ca.crt cargo install -q --locked --root /usr/local bindgen-cli@$DEB12_BINDGEN
		rm -rf /root/.cargo /tmp/ca.crt
		bindgen --version" >>"$LOGS/root.log" 2>&1; then
		umount "$ROOT12.tmp/proc"
		rm -f "$ROOT12.tmp/etc/resolv.conf"
		echo "$((SECONDS - t1))" >"$ROOT12.tmp/.seconds"
		touch "$ROOT12.tmp/.complete" && mv "$ROOT12.tmp" "$ROOT12"
	else
		umount "$ROOT12.tmp/proc" 2>/dev/null
		bad deb12-root "see $LOGS/root.log"
	fi
fi
if [ -e "$ROOT12/.complete" ]; then
	ok "deb12-root (cached: $(cat "$ROOT12/.seconds") s when built)"
	deb12=1
else
	deb12=
fi

# --- the driver layer: nvidia-kernel-dkms 535, DKMS 3.0.10 builds it for 6.1 -------
LAYER12=$NVPM_CACHE/neighbours/deb12-driver-$(printf '%s|%s' "${ROOT12##*/}" "$DRIVER12_PKGS" | sha256sum | cut -c1-10)
if [ -n "$deb12" ] && [ ! -e "$LAYER12/.complete" ]; then
	step "Debian 12's $K with Debian's $DRIVER12_PKGS: DKMS 3.0.10 builds the driver (about 8 minutes; cached)"
	rm -rf "$LAYER12.tmp"
	r=$LAYER12.tmp/root
	if mount_root "$r" "$ROOT12" "$LAYER12.tmp/upper" "$LAYER12.tmp/work"; then
		cp /etc/resolv.conf "$r/etc/resolv.conf"
		t1=$SECONDS
		# shellcheck disable=SC2086 # DRIVER12_PKGS is a list of words
		if inr "$r" sh -ec "apt-get update -qq; apt-get install -y -q --no-install-recommends $DRIVER12_PKGS" >"$LOGS/layer-driver.log" 2>&1; then
			echo "$((SECONDS - t1))" >"$LAYER12.tmp/seconds"
			rm -f "$r/etc/resolv.conf"
			umount_root "$r"
			rm -rf "$LAYER12" && mkdir -p "$LAYER12" && mv "$LAYER12.tmp/upper" "$LAYER12.tmp/seconds" "$LAYER12/" &&
				cp "$LOGS/layer-driver.log" "$LAYER12/driver.log" && touch "$LAYER12/.complete" && rm -rf "$LAYER12.tmp"
			step "driver layer built in $(cat "$LAYER12/seconds") s"
		else
			umount_root "$r"
			bad deb12-driver-layer "see $LOGS/layer-driver.log"
		fi
	else
		bad deb12-driver-layer "overlay mount failed"
	fi
fi
if [ -n "$deb12" ] && [ -e "$LAYER12/.complete" ]; then
	ok "deb12-driver-layer (cached: $(cat "$LAYER12/seconds") s when built)"
else
	deb12=
fi

if [ -n "$deb12" ]; then
	# --- the run's root ------------------------------------------------------------
	run_root "$NVPM_CACHE/neighbours/run-deb12" "$LAYER12/upper:$ROOT12"
	MODS=/lib/modules/$K
	DRV=$MODS/updates/dkms/nvidia-current.ko

	# --- what Debian 12's driver package left: no table anywhere ---------------------
	step "the real layout of $DRIVER12_PKG $DRIVER12_VER with DKMS 3.0.10"
	inroot "dkms --version; dkms status; find /var/lib/dkms -maxdepth 6 | sort; find $MODS/updates | sort; ls /usr/src" >"$LOGS/layout.txt" 2>&1
	insh deb12-layout-dkms "dkms --version | grep -qx 'dkms-3.0.10' && dkms status -m nvidia-current | grep -q '^$DRIVER12_DKMS, $K, x86_64: installed' && test ! -e /var/lib/dkms/nvidia"
	insh deb12-layout-driver-module "test -f $DRV && test -f $MODS/updates/dkms/nvidia-current-peermem.ko"
	insh deb12-layout-no-table "test -z \"\$(find /var/lib/dkms /usr/src/nvidia-* -name Module.symvers)\""
	insh deb12-driver-crcs "sh src/scripts/find-symvers.sh --exports $DRV '^nvidia_p2p_' >/tmp/driver-crcs && test \$(wc -l </tmp/driver-crcs) -ge 8"
	cp "$ROOT/tmp/driver-crcs" "$LOGS/driver-crcs.txt" 2>/dev/null
fi

if [ -n "$deb12" ]; then
	# --- the simulators for 6.1, the GPU's as this driver's stand-in -----------------
	sims_as_driver deb12- kernel-6.1.env "/usr/src/${DRIVER12_DKMS%/*}-${DRIVER12_DKMS#*/}" "$LAYER12.p2p-includes.h"

	# --- the RDMA core, then our packages, built on this host --------------------------
	# Driver, RDMA core, ours: the order of a fresh install. MOFED's DKMS
	# package is not built here yet: its simulator stands in, installed
	# where MOFED's DKMS package puts its modules.
	step "the RDMA core's modules for $K (the MOFED simulator, a stand-in)"
	if cp tests/sim/mofed_peer_sim.ko "$ROOT$MODS/updates/dkms/" && inr "$ROOT" depmod "$K"; then
		ok deb12-rdma-core-installed; else bad deb12-rdma-core-installed "see $LOGS/sims.log"; fi
	step "our packages built on Debian 12 (build_module.sh, dpkg-buildpackage -b with cargo-web; crates offline)"
	our_packages deb12-packages
	# As an admin installs local packages: apt-get resolves what they
	# depend on (the kernel build's tools) from the archive.
	step "apt-get install our packages: DKMS 3.0.10 builds ours for $K (carried mode, rustc-web; 3-5 minutes)"
	cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
	if inroot "apt-get install -y -q --no-install-recommends ./deb/nvidia-peer-memory-dkms_${V}-1_all.deb ./deb/nvidia-peer-memory_${V}-1_amd64.deb" >"$LOGS/install.log" 2>&1; then
		ok deb12-ours-installs; else bad deb12-ours-installs "$(tail -n 15 "$LOGS/install.log")"; fi
	insh deb12-ours-configured "dpkg-query -W -f '\${Status}' nvidia-peer-memory-dkms | grep -qx 'install ok installed'"
	insh deb12-ours-installed "dkms status -m nvidia-peer-memory -k $K | grep -q '^nvidia-peer-memory/$V, $K, x86_64: installed'"
	# DKMS 3.0.10 keeps a failed build's log in build/, a good one's in log/.
	inroot "cat /var/lib/dkms/nvidia-peer-memory/$V/$K/x86_64/log/make.log 2>/dev/null ||
		cat /var/lib/dkms/nvidia-peer-memory/$V/build/make.log" >"$LOGS/make.log" 2>&1
	check deb12-crcs-from-installed grep -qF "CONFIG_MODVERSIONS=y: CRCs from $DRV $MODS/updates/dkms/mofed_peer_sim.ko" "$LOGS/make.log"
	check deb12-crcs-driver-version grep -qF "(nvidia 535.309.01, exports nvidia_p2p_get_pages for $K)" "$LOGS/make.log"
	carried_crcs_are deb12-crcs-carried-are-drivers '^nvidia_p2p_' "$DRV"

	# --- a guest: Debian's 6.1 loads the module DKMS 3.0.10 built against 535 ---------
	step "Debian's $K boots the module DKMS built against the real 535 driver (01, 02, 40, 41; page tables 1.2)"
	guest deb12-guest kernel-6.1.env build/guest-neighbours-deb12 GUEST_EXTRA_KO="$(echo tests/sim/*.ko)" \
		GUEST_SCENARIOS='0[12]-* 4[01]-*' GUEST_ENV="GPU_PT_ABI=1.2 BUILT_P2P_ABI=1"

	# --- modprobe and the doctor --------------------------------------------------------
	insh deb12-modprobe-loads-ours "modprobe -S $K -n -v --ignore-install nvidia_peermem 2>&1 | tee /dev/stderr | grep -q 'insmod $MODS/updates/dkms/nvidia_peermem.ko'"
	doctor doctor
	check deb12-doctor-build-matches python3 -c "
import json
c = {c['id']: c for c in json.load(open('$LOGS/doctor.json'))['checks']}
b = c['module.build']
assert b['status'] == 'OK', b
assert '$DRV (nvidia 535.309.01): ' in b['detail'], b['detail']
"
fi

# --- the driver upgraded: 535 -> 550 ---------------------------------------------
# Debian 12 has no 550: it comes with Debian 13, whose package needs DKMS
# 3.0.11 or later, so apt upgrades DKMS to 3.2.2 with it (a partial upgrade,
# what an admin who takes the newer driver before the release gets). DKMS
# builds the new driver for 6.1 in its postinst, then dpkg runs our trigger:
# ours must be rebuilt with the 550 module's CRCs, read from that module,
# not from anything the 535 build left behind.
DRIVER12_NEW_VER=550.163.01-2
DRIVER12_NEW_PKGS="$DRIVER12_PKG=$DRIVER12_NEW_VER nvidia-smi=$DRIVER12_NEW_VER libcuda1=$DRIVER12_NEW_VER"
if [ -n "$deb12" ] && [[ $parts == *" deb12-upgrade "* ]]; then
	step "the driver upgraded to Debian 13's $DRIVER12_NEW_VER with its DKMS (apt from trixie; DKMS builds 550 for $K, then its post_transaction hook rebuilds ours: about 12 minutes)"
	# shellcheck disable=SC2086 # DRIVER12_NEW_PKGS is a list of words
	if inroot "sed -n 's/ bookworm / trixie /p' /etc/apt/sources.list | grep -v security >/etc/apt/sources.list.d/trixie.list
		apt-get update -qq && apt-get install -y -q --no-install-recommends -t trixie $DRIVER12_NEW_PKGS" >"$LOGS/upgrade.log" 2>&1; then
		ok deb12-upgrade-installs; else bad deb12-upgrade-installs "$(tail -n 15 "$LOGS/upgrade.log")"; fi
	insh deb12-upgrade-driver-built "dkms --version | grep -q '^dkms-3\.2' && dkms status -m nvidia-current | grep -q '^nvidia-current/550.163.01, $K, x86_64: installed' && ! dkms status -m nvidia-current | grep -q 535"
	DRV=$(inr "$ROOT" sh -c "ls $MODS/updates/dkms/nvidia-current.ko*")
	# The trigger may run before the driver's postinst has built 550 (it did
	# here); DKMS's post_transaction command rebuilds ours after that build.
	# The rebuilt module may equal the old one byte for byte: 535's and 550's
	# nvidia_p2p_* CRCs agree. Its build log names the driver it read.
	# Between the unpack and the postinst the trigger finds 550's source but
	# no build of it for $K: it says the driver's build is to come, not gone.
	check deb12-upgrade-trigger-says-pending sh -c "grep -qF \"the NVIDIA driver's DKMS module nvidia-current/550.163.01 is present but not built for $K yet\" '$LOGS/upgrade.log' &&
		! grep -q 'warning: not rebuilt for' '$LOGS/upgrade.log'"
	insh deb12-upgrade-ours-installed "dkms status -m nvidia-peer-memory -k $K | grep -q '^nvidia-peer-memory/$V, $K, x86_64: installed'"
	inroot "cat /var/lib/dkms/nvidia-peer-memory/$V/$K/x86_64/log/make.log" >"$LOGS/upgrade-make.log" 2>&1
	check deb12-upgrade-rebuilt-with-550 grep -qF "nvidia_p2p_*: $DRV (nvidia 550.163.01, exports nvidia_p2p_get_pages for $K)" "$LOGS/upgrade-make.log"
	check deb12-upgrade-rebuilt-by-dkms-hook sh -c "grep -q 'Executing post-transaction command' '$LOGS/upgrade.log' &&
		test -s '$ROOT/var/lib/nvidia-peer-memory/inputs/$K' && test ! -e '$ROOT/var/lib/nvidia-peer-memory/inputs/$K.failed'"
	carried_crcs_are deb12-upgrade-crcs-carried-are-drivers '^nvidia_p2p_' "$DRV"
	doctor doctor-upgrade
	module_build doctor-upgrade OK
	check deb12-upgrade-doctor-names-550 grep -qF "$DRV (nvidia 550.163.01)" "$LOGS/doctor-upgrade.json"
fi
if [ -n "$deb12" ]; then
	rm -f "$ROOT/etc/resolv.conf"
	umount_root "$ROOT"
fi
