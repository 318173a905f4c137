#!/usr/bin/env bash
# Provisions the packaging test root: a Debian trixie root with the tools the
# packaging suite runs (dpkg-buildpackage, dh-dkms, lintian, rpmbuild, rpmlint,
# and the shell and unit checkers), DKMS, the Rust toolchain that Debian's 7.3
# kernel names (and its cargo, which builds nvidia-peermem-doctor into the
# packages), clang and LLVM 19 (the debug kernel, a DKMS target of its own,
# is clang-built), Debian's cross toolchain for arm64 (arm64 a foreign
# dpkg architecture: gcc-aarch64-linux-gnu, libc6-dev:arm64 and Rust's
# standard library libstd-rust-dev:arm64, for dpkg-buildpackage -a arm64 and
# rpmbuild --target aarch64) with qemu-user to run what they build (called
# as qemu-aarch64, no binfmt), and Debian's *stock* headers for that kernel. linux-source and
# a second kernel's headers are downloaded into apt's cache only: the tests
# install them (a missing linux-source must be reported first).
# Cached outside the repo as $NVPM_CACHE/pkgroot-<key>, key = what produced it.
# Prints the root's path on stdout. Needs kernel.env (run `make` first).
# shellcheck source-path=SCRIPTDIR/../..
# shellcheck disable=SC2153 # KREL, KPKGVER come from kernel.env
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
[ "$(id -u)" = 0 ] || die "the packaging root needs root (debootstrap, chroot)"
[ -r "$NVPM_CACHE/kernel.env" ] || die "not provisioned yet: run make"
# shellcheck source=/dev/null
. "$NVPM_CACHE/kernel.env"
KABI=${KREL%-amd64}
# The second kernel for the "new kernel" test: another flavour of the same upload.
KREL2=$KABI-cloud-amd64
PKGROOT_PACKAGES="build-essential dkms dh-dkms debhelper dpkg-dev fakeroot lintian rpm rpmlint shellcheck systemd \
make gcc-14 gcc-12 gcc bc bison flex libssl-dev libelf-dev dwarves python3 kmod cpio xz-utils zstd file \
rustc rust-src bindgen libclang1-19 libclang-19-dev cargo clang-19 lld-19 llvm-19"
# The foreign architecture and what cross-building for it needs (the Rust
# standard library of the same trixie upload as rustc: apt's candidates).
PKGROOT_FOREIGN=arm64
PKGROOT_CROSS_PACKAGES="gcc-aarch64-linux-gnu libc6-dev:arm64 libstd-rust-dev:arm64 qemu-user"
REV=2 # bump when this script changes what it builds
key=$(printf '%s|%s|%s|%s|%s|%s' "$REV" "$KPKGVER" "$KREL2" "$PKGROOT_PACKAGES" "$PKGROOT_FOREIGN" "$PKGROOT_CROSS_PACKAGES" |
	sha256sum | cut -c1-10)
CHROOT=$NVPM_CACHE/pkgroot-$key
if [ -e "$CHROOT/.complete" ]; then echo "$CHROOT"; exit 0; fi

mkdir -p "$NVPM_CACHE"
enter_private_namespace "$@"
exec 9>"$NVPM_CACHE/.pkgroot.lock"
flock 9
if [ -e "$CHROOT/.complete" ]; then echo "$CHROOT"; exit 0; fi
t0=$SECONDS
rm -rf "$CHROOT" "$NVPM_CACHE"/pkgroot-*.tmp
tmp=$CHROOT.tmp
debootstrap_trixie "$tmp" "$NVPM_CACHE/pkgroot-debootstrap.log" "packaging root: debootstrap trixie (about 1 minute)"
CHROOT=$tmp
mount -t proc proc "$CHROOT/proc"
export TMPDIR=$CHROOT/tmp
in_chroot dpkg --add-architecture "$PKGROOT_FOREIGN"
in_chroot apt-get -o DPkg::Lock::Timeout=900 update -qq
log "packaging root: installing the tools, the toolchain and linux-headers-$KREL $KPKGVER (3-5 minutes)"
# shellcheck disable=SC2086 # the package list is split on purpose
in_chroot apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends $PKGROOT_PACKAGES $PKGROOT_CROSS_PACKAGES \
	"linux-headers-$KREL=$KPKGVER" "linux-headers-$KABI-common=$KPKGVER" "linux-kbuild-$KABI=$KPKGVER" \
	>"$NVPM_CACHE/pkgroot-apt.log" 2>&1 || die "apt-get install failed, see $NVPM_CACHE/pkgroot-apt.log"
log "packaging root: downloading linux-source-7.3 and linux-headers-$KREL2 into apt's cache"
in_chroot apt-get -o DPkg::Lock::Timeout=900 install -y -q -d --no-install-recommends \
	"linux-source-7.3=$KPKGVER" "linux-headers-$KREL2=$KPKGVER" >>"$NVPM_CACHE/pkgroot-apt.log" 2>&1 ||
	die "apt-get download failed, see $NVPM_CACHE/pkgroot-apt.log"
# The tests run offline from here on.
rm -f "$CHROOT/etc/resolv.conf"
umount "$CHROOT/proc"
{
	echo "KPKGVER=\"$KPKGVER\""
	echo "KREL=\"$KREL\""
	echo "KREL2=\"$KREL2\""
} >"$CHROOT/.pkgroot.env"
touch "$CHROOT/.complete"
mv "$CHROOT" "${CHROOT%.tmp}"
log "packaging root ready in $((SECONDS - t0)) s"
echo "${CHROOT%.tmp}"
