# shellcheck shell=bash
# shellcheck disable=SC2016 # scripts for the root in single quotes
# make check-neighbours: the packaging root with Debian 13's 6.12 and
# Debian's nvidia-kernel-dkms 550 built by DKMS 3.2.2, a cached layer
# ($LAYER) under the deb13 and ofed parts' roots. Sourced by deb13.sh and
# ofed.sh (run.sh's helpers); sets PKGROOT, K, KPKG, DEBS, DRIVER_*, LAYER.
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
# shellcheck disable=SC2034 # the parts that source this use it
DRIVER_DKMS=nvidia-current/550.163.01
# Debian's open flavour of the same release (contrib: NVIDIA's open kernel
# modules, DKMS module nvidia-current-open), as order.sh installs it.
# shellcheck disable=SC2034 # order.sh uses them
OPEN_DRIVER_PKGS="nvidia-open-kernel-dkms=$DRIVER_VER nvidia-smi=$DRIVER_VER libcuda1=$DRIVER_VER"
# shellcheck disable=SC2034
OPEN_DRIVER_DKMS=nvidia-current-open/550.163.01

LAYER_LOGS=$REPO/build/logs/neighbours/layer
mkdir -p "$LAYER_LOGS"

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
			rm -rf /tmp/debs' >"$LAYER_LOGS/layer-kernel.log" 2>&1 &&
			inr "$r" apt-get install -y -q --no-install-recommends $DRIVER_PKGS >"$LAYER_LOGS/layer-driver.log" 2>&1; then
			echo "$((SECONDS - t1))" >"$LAYER.tmp/seconds"
			rm -f "$r/etc/resolv.conf"
			umount_root "$r"
			rm -rf "$LAYER" && mkdir -p "$LAYER" && mv "$LAYER.tmp/upper" "$LAYER.tmp/seconds" "$LAYER/" &&
				cp "$LAYER_LOGS/layer-driver.log" "$LAYER/driver.log" && touch "$LAYER/.complete" && rm -rf "$LAYER.tmp"
			step "driver layer built in $(cat "$LAYER/seconds") s"
		else
			umount_root "$r"
			bad driver-layer "see $LAYER_LOGS/layer-kernel.log, $LAYER_LOGS/layer-driver.log"
			finish
		fi
	else
		bad driver-layer "overlay mount failed"
		finish
	fi
fi
ok "driver-layer (cached: $(cat "$LAYER/seconds") s when built)"

