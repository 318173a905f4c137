#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# provision-carried.sh: a Debian kernel without Rust for the carried-mode tests
# (tests/kernels/run.sh): its newest image, headers and kbuild packages from the
# Debian archive, the headers unpacked in the trixie root where a host has
# them (/usr/src/linux-headers-KREL, Debian's files unmodified), the image
# unpacked for QEMU. Writes $NVPM_CACHE/kernel-SERIES.env like provision.sh
# (kernel-SERIES-KARCH.env for another architecture).
#
# Usage: provision-carried.sh SERIES     6.12 (Debian 13), 6.1 (Debian 12) or 5.10 (Debian 11)
# KARCH=arm64 (Debian 13's 6.12 only): Debian's arm64 kernel, cross-built
# as provision.sh's arm64 7.3 is (its cross compilers, QEMU and guest
# userland), its headers run by the build machine's linux-kbuild package
# of the same version (the arm64 one holds arm64 programs).
# NVPM_CARRIED_KREL=RELEASE: that release of the series instead of the
# newest (another kernel an admin installs beside it: make
# check-neighbours' newkernel part); writes kernel-RELEASE.env.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

SERIES=${1:?usage: provision-carried.sh 6.12|6.1|5.10}
KARCH=${KARCH:-amd64}
case $KARCH in
amd64) KTRIPLE=x86_64-linux-gnu ;;
arm64) KTRIPLE=aarch64-linux-gnu ;;
*) die "provision-carried: KARCH=$KARCH: expected amd64 or arm64" ;;
esac
# Debian suite, and the compiler the kernel was built with (its headers'
# .kernelvariables name it). Debian 11's gcc-10 is not in trixie: its
# modules are built with gcc-12 (kmake, the env file's KMAKE_FLAGS).
kmake=
case $SERIES in
6.12) suite=trixie cc=gcc-14 ;;
6.1) suite=bookworm cc=gcc-12 ;;
5.10) suite=bullseye cc=gcc-12 kmake=CC=x86_64-linux-gnu-gcc-12 ;;
*) die "provision-carried: SERIES=$SERIES: expected 6.12, 6.1 or 5.10" ;;
esac
[ "$KARCH" = amd64 ] || [ "$suite" = trixie ] || die "provision-carried: KARCH=$KARCH is provisioned for 6.12 (Debian 13) only"

[ -x "$CHROOT/usr/bin/apt-get" ] || scripts/provision.sh
enter_private_namespace "$@"
chroot_mount
exec 9>"$NVPM_CACHE/.lock-carried"
flock 9

# Another suite's packages come from an apt state of their own, so the
# root's own apt sources and lists stay trixie's.
apt_opts=
if [ "$suite" != trixie ]; then
	mirror=$(apt_uri debian) || die "no Debian archive URI in /etc/apt/sources*"
	security=$(apt_uri debian-security) || security=""
	lists=/var/lib/apt/lists-$suite
	mkdir -p "$CHROOT$lists/partial"
	{
		echo "deb $mirror $suite main"
		echo "deb $mirror $suite-updates main"
		[ -n "$security" ] && echo "deb $security $suite-security main"
	} >"$CHROOT/etc/apt/$suite.list"
	apt_opts="-o Dir::Etc::SourceList=/etc/apt/$suite.list -o Dir::Etc::SourceParts=- -o Dir::State::Lists=$lists"
	if [ -z "$(find "$CHROOT$lists" -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -n1)" ]; then
		in_chroot apt-get $apt_opts update -qq >>"$NVPM_CACHE/apt.log" 2>&1 || die "apt-get update for $suite failed, see $NVPM_CACHE/apt.log"
	fi
fi
# The compiler the kernel was built with; for a foreign KARCH its cross
# compilers, QEMU and Rust's standard library for the guest tools, as
# provision.sh installs them.
if [ "$KARCH" != amd64 ]; then
	if ! in_chroot dpkg --print-foreign-architectures | grep -qx "$KARCH"; then
		log "adding $KARCH to the chroot's dpkg architectures"
		in_chroot dpkg --add-architecture "$KARCH"
		in_chroot apt-get -o DPkg::Lock::Timeout=900 update -qq >>"$NVPM_CACHE/apt.log" 2>&1 ||
			die "apt-get update failed, see $NVPM_CACHE/apt.log"
	fi
	missing=$(for p in $(cross_packages); do
		in_chroot dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || echo "$p"
	done)
	if [ -n "$missing" ]; then
		log "installing in the root: $(echo $missing)"
		# shellcheck disable=SC2086 # word splitting of the package list is intended
		in_chroot apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends $missing \
			>>"$NVPM_CACHE/apt.log" 2>&1 || die "apt-get install failed, see $NVPM_CACHE/apt.log"
	fi
fi
if ! in_chroot sh -c "command -v $KTRIPLE-$cc" >/dev/null; then
	log "installing $cc in the root"
	in_chroot apt-get install -y -qq "$cc" >>"$NVPM_CACHE/apt.log" 2>&1 || die "apt-get install $cc failed"
fi

# The newest linux-image-KARCH of the series names the kernel release.
meta=$(in_chroot apt-cache $apt_opts madison "linux-image-$KARCH:$KARCH" | awk -F'|' -v s="$SERIES" '
	{ gsub(/ /, "", $2) } index($2, s ".") == 1 { print $2 }' | sort -V | tail -n 1)
[ -n "$meta" ] || die "provision-carried: no linux-image-$KARCH $SERIES.x in Debian $suite"
KREL=$(in_chroot apt-cache $apt_opts depends "linux-image-$KARCH:$KARCH=$meta" |
	sed -n "s/.*Depends: linux-image-\(.*-$KARCH\)\(:$KARCH\)\{0,1\}$/\1/p" | head -n 1)
[ -n "$KREL" ] || die "provision-carried: cannot tell the kernel release of linux-image-$KARCH $meta"
if [ -n "${NVPM_CARRIED_KREL:-}" ]; then
	KREL=$NVPM_CARRIED_KREL
	meta=$(in_chroot apt-cache $apt_opts madison "linux-image-$KREL-unsigned:$KARCH" | awk -F'|' '{ gsub(/ /, "", $2); print $2 }' | sort -V | tail -n 1)
	[ -n "$meta" ] || die "provision-carried: NVPM_CARRIED_KREL=$KREL: no linux-image-$KREL-unsigned in Debian $suite"
fi
KROOT=/kernels-carried/$KREL
dir=$CHROOT$KROOT
if [ ! -e "$dir/.complete" ]; then
	t0=$SECONDS
	rm -rf "$dir" && mkdir -p "$dir/debs" "$dir/pkg"
	log "downloading Debian's $KREL image, headers and kbuild ($suite)"
	# The kbuild package (the build's programs: fixdep, modpost) is the
	# build machine's own, of the headers' version.
	deps=$(in_chroot apt-cache $apt_opts depends "linux-headers-$KREL:$KARCH" | sed -e 's/[<>]//g' -e 's/:[a-z0-9]*$//')
	common=$(echo "$deps" | sed -n 's/.*Depends: \(linux-headers-.*-common\)$/\1/p' | head -n 1)
	kbuild=$(echo "$deps" | sed -n 's/.*Depends: \(linux-kbuild-[0-9.+a-z~-]*\)$/\1/p' | head -n 1)
	[ -n "$common" ] && [ -n "$kbuild" ] || die "provision-carried: linux-headers-$KREL names no -common or kbuild package"
	in_chroot sh -c "cd $KROOT/debs && apt-get $apt_opts download -qq -o APT::Sandbox::User=root \
		linux-image-$KREL-unsigned:$KARCH linux-headers-$KREL:$KARCH $common $kbuild" ||
		die "apt-get download of the $KREL packages failed"
	dpkg-deb -x "$dir"/debs/linux-image-"$KREL"-unsigned_*.deb "$dir/pkg"
	# Unpacked, not installed: the root's dpkg would hold them as broken (no
	# image installed) and refuse every later apt-get install.
	log "unpacking Debian's linux-headers-$KREL into the root"
	# Through the root's /lib -> usr/lib (Debian 12's packages ship /lib).
	for d in "$dir"/debs/linux-kbuild-*.deb "$dir"/debs/linux-headers-*.deb; do
		dpkg-deb --fsys-tarfile "$d" | tar -x --keep-directory-symlink -C "$CHROOT"
	done
	[ -L "$CHROOT/lib" ] || die "provision-carried: unpacking replaced the root's /lib symlink"
	[ -f "$CHROOT/usr/src/linux-headers-$KREL/.config" ] || die "linux-headers-$KREL did not install"
	[ "$KARCH" = amd64 ] || ensure_userland "$dir/userland"
	touch "$dir/.complete"
	log "$KREL ready in $((SECONDS - t0)) s"
fi

env=$NVPM_CACHE/kernel-$SERIES.env
[ -z "${NVPM_CARRIED_KREL:-}" ] || env=$NVPM_CACHE/kernel-$KREL.env
# A foreign KARCH's build names its cross compilers (the headers'
# .kernelvariables, provision.sh's kmake_flags).
if [ "$KARCH" != amd64 ]; then
	env=$NVPM_CACHE/kernel-$SERIES-$KARCH.env
	kmake=$(kmake_flags "$CHROOT/usr/src/linux-headers-$KREL")
fi
cat >"$env.tmp" <<EOT
# Written by scripts/provision-carried.sh: a kernel without Rust (carried mode).
KPKGVER="$meta"
KREL="$KREL"
KROOT="$KROOT"
KDIR_CHROOT="/usr/src/linux-headers-$KREL"
KDIR_HOST="$CHROOT/usr/src/linux-headers-$KREL"
VMLINUZ="$dir/pkg/boot/vmlinuz-$KREL"
DEBIAN_MODULES="$(ls -d "$dir/pkg/usr/lib/modules/$KREL" "$dir/pkg/lib/modules/$KREL" 2>/dev/null | head -n 1)"
KMAKE_FLAGS="$kmake"
GUEST_USERLAND="$([ "$KARCH" = amd64 ] || echo "$dir/userland")"
CHROOT="$CHROOT"
EOT
mv "$env.tmp" "$env"
