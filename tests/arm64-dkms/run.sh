#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# tests/arm64-dkms/run.sh: DKMS on an arm64 host, natively. A Debian trixie root for
# arm64, run under qemu-user (binfmt_misc), with Debian's arm64 7.3 headers,
# linux-source-7.3, the kernel's rustc and bindgen and gcc-arm-linux-gnueabihf
# (arm64's compat vDSO compiler), as an admin of a Grace host installs them.
# The DKMS tree goes in as the -dkms package puts it (make install-dkms, dkms
# add), then:
# - dkms-ready names carried mode while the compat compiler is away (and
#   rust-headers --dry-run names its package), kernel mode with it;
# - dkms install: rust-headers builds the Rust overlay (once; cached in
#   $NVPM_CACHE/arm64-dkms-rust-headers), the build takes kernel mode;
# - the .ko is aarch64 with the release's vermagic; dkms status: installed.
# Not in make check: everything runs emulated, and rust-headers compiles the
# kernel crate (cold about 20 minutes on 2 cores, warm under 2).
# NVPM_ARM64_DKMS_COLD=1 drops the cached overlay first. Needs root (chroot,
# mounts, binfmt_misc: an aarch64 handler is registered for the run where
# none is). Ends with ARM64-DKMS-SUMMARY.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
[ "$(id -u)" = 0 ] || die "arm64-dkms needs root (chroot, mounts, binfmt_misc)"
[ -r "$NVPM_CACHE/kernel.env" ] || die "not provisioned yet: run make"
# shellcheck source=/dev/null
KPKGVER=$(. "$NVPM_CACHE/kernel.env" && echo "$KPKGVER")
KREL=7.3.4+deb13-arm64
KABI=${KREL%-arm64}
enter_private_namespace "$@"
mkdir -p build/logs
LOGS=$PWD/build/logs
SUITE=arm64-dkms SUMMARY=ARM64-DKMS
# shellcheck source=tests/lib/check.sh
. tests/lib/check.sh

# --- qemu-user for aarch64 -----------------------------------------------------
# The trixie root's qemu-aarch64 is static, so the kernel opens it at
# registration (flag F) and it runs inside the arm64 root.
step "qemu-user for aarch64 (binfmt_misc)"
[ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc ||
	die "binfmt_misc is not available"
if ! [ -x "$CHROOT/usr/bin/qemu-aarch64" ]; then
	in_chroot apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends qemu-user \
		>"$LOGS/arm64-dkms-qemu.log" 2>&1 || die "installing qemu-user failed, see $LOGS/arm64-dkms-qemu.log"
fi
binfmt=
if ! grep -qs '^magic 7f454c460201010000000000000000000200b700' /proc/sys/fs/binfmt_misc/*; then
	binfmt=nvpm-aarch64
	printf ':%s:M::\\x7fELF\\x02\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\xb7\\x00:%s:%s:OCF\n' \
		"$binfmt" '\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff' \
		"$CHROOT/usr/bin/qemu-aarch64" >/proc/sys/fs/binfmt_misc/register || die "registering qemu-aarch64 failed"
	trap 'echo -1 >/proc/sys/fs/binfmt_misc/$binfmt' EXIT
fi

# --- the arm64 root (cached) ---------------------------------------------------
PACKAGES="build-essential dkms make gcc-14 gcc bc bison flex libssl-dev libelf-dev dwarves python3 kmod \
cpio xz-utils zstd file rustc rust-src bindgen libclang1-19 libclang-19-dev gcc-arm-linux-gnueabihf"
REV=1 # bump when this script changes what it builds
key=$(printf '%s|%s|%s' "$REV" "$KPKGVER" "$PACKAGES" | sha256sum | cut -c1-10)
BASE=$NVPM_CACHE/arm64-host-$key
if [ ! -e "$BASE/.complete" ]; then
	step "the arm64 root: debootstrap, then the toolchain and linux-headers-$KREL (about 4 minutes, emulated)"
	rm -rf "$NVPM_CACHE"/arm64-host-*
	debootstrap_trixie "$BASE.tmp" "$LOGS/arm64-dkms-debootstrap.log" "arm64 root: debootstrap trixie" --arch=arm64
	mount -t proc proc "$BASE.tmp/proc"
	# shellcheck disable=SC2086 # the package list is split on purpose
	CHROOT=$BASE.tmp in_chroot sh -c "apt-get -o DPkg::Lock::Timeout=900 update -qq && apt-get install -y -q --no-install-recommends $PACKAGES \
		linux-headers-$KREL=$KPKGVER linux-headers-$KABI-common=$KPKGVER linux-kbuild-$KABI=$KPKGVER linux-source-7.3=$KPKGVER" \
		>"$LOGS/arm64-dkms-apt.log" 2>&1 || die "apt-get install in the arm64 root failed, see $LOGS/arm64-dkms-apt.log"
	umount "$BASE.tmp/proc"
	rm -f "$BASE.tmp/etc/resolv.conf"
	touch "$BASE.tmp/.complete"
	mv "$BASE.tmp" "$BASE"
fi

# --- this run: an overlay over it, the DKMS tree installed ---------------------
RUN=$NVPM_CACHE/arm64-dkms-run
ROOT=$RUN/root
RH_CACHE=$NVPM_CACHE/arm64-dkms-rust-headers
[ -z "${NVPM_ARM64_DKMS_COLD:-}" ] || rm -rf "$RH_CACHE"
rm -rf "$RUN"
mkdir -p "$RUN/upper" "$RUN/work" "$ROOT" "$RH_CACHE"
mount -t overlay overlay -o "lowerdir=$BASE,upperdir=$RUN/upper,workdir=$RUN/work" "$ROOT" || die "overlay mount failed"
mount -t proc proc "$ROOT/proc"
mkdir -p "$ROOT/var/cache/nvidia-peer-memory/rust-headers"
mount --bind "$RH_CACHE" "$ROOT/var/cache/nvidia-peer-memory/rust-headers"
# shellcheck disable=SC2317 # called through check
a64() { CHROOT=$ROOT in_chroot "$@"; }
# a64_says PATTERN COMMAND...: COMMAND, run in the root, prints a line
# matching PATTERN.
# shellcheck disable=SC2317 # called through check
a64_says() {
	local pattern=$1 out
	shift
	out=$(a64 "$@" 2>&1)
	echo "$out"
	grep -q -- "$pattern" <<<"$out"
}

step "the DKMS tree, as the -dkms package installs it (make install-dkms, dkms add)"
kbuild/carried-source.sh build/carried-src >"$LOGS/arm64-dkms-carried-src.log" 2>&1 ||
	die "the pinned Rust sources: see $LOGS/arm64-dkms-carried-src.log"
make -s DESTDIR="$ROOT" install-dkms >"$LOGS/arm64-dkms-install.log" 2>&1 ||
	die "make install-dkms failed, see $LOGS/arm64-dkms-install.log"
V=$(cat VERSION)
check dkms-add a64 dkms add "nvidia-peer-memory/$V"

# Before the first build the headers are stock: what dkms-ready says decides
# on the compat vDSO compiler.
mv "$ROOT/usr/bin/arm-linux-gnueabihf-gcc" "$ROOT/usr/bin/arm-linux-gnueabihf-gcc.away"
check ready-carried-without-compat-cc a64_says 'carried mode' /usr/lib/nvidia-peer-memory/dkms-ready "$KREL"
check rust-headers-names-compat-cc a64_says 'apt-get install gcc-arm-linux-gnueabihf' \
	/usr/lib/nvidia-peer-memory/rust-headers --dry-run "$KREL"
mv "$ROOT/usr/bin/arm-linux-gnueabihf-gcc.away" "$ROOT/usr/bin/arm-linux-gnueabihf-gcc"
check ready-kernel-mode a64_says 'kernel mode' /usr/lib/nvidia-peer-memory/dkms-ready "$KREL"

step "dkms install for $KREL (the Rust overlay: about 15 minutes emulated when not cached)"
(
	while sleep 60; do
		line=$(grep -hE '^rust-headers:|^  (RUSTC|LD|MODPOST)' "$ROOT/var/lib/dkms/nvidia-peer-memory/$V/build/make.log" 2>/dev/null |
			tail -n1 | cut -c1-100)
		[ -z "$line" ] || step "  $line"
	done
) &
ticker=$!
check dkms-install a64 dkms install "nvidia-peer-memory/$V" -k "$KREL"
kill "$ticker" 2>/dev/null
wait "$ticker" 2>/dev/null
mlog=$ROOT/var/lib/dkms/nvidia-peer-memory/$V/$KREL/aarch64/log/make.log
cp "$mlog" "$LOGS/arm64-dkms-make.log" 2>/dev/null
check overlay-in-place grep -q "^rust-headers: /usr/src/linux-headers-$KREL is Rust-capable" "$mlog"
check kernel-mode grep -q '^nvidia_peermem: Rust support: kernel$' "$mlog"
ko=$ROOT/lib/modules/$KREL/updates/dkms/nvidia_peermem.ko
check ko-aarch64 sh -c "file -b '$ko' | grep -q 'ARM aarch64'"
check ko-vermagic a64_says "^$KREL SMP preempt mod_unload aarch64\$" \
	modinfo -F vermagic "/lib/modules/$KREL/updates/dkms/nvidia_peermem.ko"
check dkms-status a64_says "^nvidia-peer-memory/$V, $KREL, aarch64: installed\$" dkms status
finish
