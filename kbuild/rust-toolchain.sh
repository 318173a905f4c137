#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# rust-toolchain.sh: checks the toolchain carried mode needs (any rustc the
# pinned crates support, its rust-src, bindgen and libclang) and names the
# packages that provide it on this distribution. Exit 0 ready, 1 with the
# list of what is missing. The minima are kbuild/carried.pin's
# (carried-source.sh holds them to the pinned sources' min-tool-version.sh).
#
# Usage: rust-toolchain.sh            check
#        rust-toolchain.sh --bindgen  print the bindgen carried mode runs
# Env: RUSTC (default rustc), BINDGEN (default: below); OS_RELEASE (default
# /etc/os-release).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
rustc=${RUSTC:-rustc}

# version_ge A B: A >= B for dotted versions.
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

# shellcheck source=kbuild/carried.pin
. "$top/kbuild/carried.pin"
rustc_min=${CARRIED_RUSTC_MIN:-} bindgen_min=${CARRIED_BINDGEN_MIN:-}
if [ -z "$rustc_min" ] || [ -z "$bindgen_min" ]; then
	echo "rust-toolchain: $top/kbuild/carried.pin names no CARRIED_RUSTC_MIN or CARRIED_BINDGEN_MIN" >&2
	exit 1
fi

# The bindgen: BINDGEN if set, else the first new enough of bindgen on
# PATH and where `cargo install` puts it (/usr/local/bin with --root
# /usr/local, root's ~/.cargo/bin), else bindgen. Where no distribution
# package is new enough (Debian 12 and 11, RHEL), bindgen comes from cargo,
# and DKMS run from apt does not see it on PATH: apt runs maintainer scripts
# with PATH=/usr/sbin:/usr/bin:/sbin:/bin (its DPkg::Path).
bindgen=${BINDGEN:-}
if [ -z "$bindgen" ]; then
	for b in bindgen /usr/local/bin/bindgen "${HOME:-/root}/.cargo/bin/bindgen" /root/.cargo/bin/bindgen; do
		v=$("$b" --version 2>/dev/null | awk '{print $2}')
		if [ -n "$v" ] && version_ge "$v" "$bindgen_min"; then bindgen=$b; break; fi
	done
	bindgen=${bindgen:-bindgen}
fi
if [ "${1:-}" = --bindgen ]; then
	echo "$bindgen"
	exit 0
fi

missing=
rv=$("$rustc" --version 2>/dev/null | awk '{print $2}')
if [ -z "$rv" ]; then missing="$missing rustc>=$rustc_min"
elif ! version_ge "$rv" "$rustc_min"; then missing="$missing rustc>=$rustc_min(have-$rv)"
elif [ ! -f "$("$rustc" --print sysroot)/lib/rustlib/src/rust/library/core/src/lib.rs" ]; then missing="$missing rust-src"
fi
bv=$("$bindgen" --version 2>/dev/null | awk '{print $2}')
if [ -z "$bv" ]; then missing="$missing bindgen>=$bindgen_min"
elif ! version_ge "$bv" "$bindgen_min"; then missing="$missing bindgen>=$bindgen_min(have-$bv)"
elif ! "$bindgen" --version >/dev/null 2>&1 || ! echo 'int x;' | "$bindgen" /dev/stdin -- -xc >/dev/null 2>&1; then
	missing="$missing libclang"
fi
[ -z "$missing" ] && exit 0

# A missing os-release is no error: the packages are named without a distribution.
os_release=${OS_RELEASE:-/etc/os-release}
if [ -r "$os_release" ]; then
	# shellcheck disable=SC1090 # os-release, or the tests' stand-in
	. "$os_release"
else
	ID=unknown
fi
case "${ID:-}:${VERSION_ID:-}" in
# Debian 11 and 12: rustc and bindgen are too old, rustc-web new enough.
debian:11 | debian:12) pkgs="rustc-web rust-web-src libclang-dev; bindgen $bindgen_min is not in Debian $VERSION_ID: cargo install --locked bindgen-cli@$bindgen_min" ;;
debian:*) pkgs="rustc rust-src bindgen libclang-dev" ;;
ubuntu:*) pkgs="rustc-1.xx rust-1.xx-src (a version >= $rustc_min; update-alternatives or RUSTC=rustc-1.xx), bindgen-0.71 or newer, libclang-dev" ;;
rhel:* | rocky:* | almalinux:* | centos:*) pkgs="rust rust-src clang-devel (rust-toolset); bindgen: cargo install --locked bindgen-cli@$bindgen_min" ;;
*) pkgs="rustc >= $rustc_min with its rust-src, bindgen >= $bindgen_min, libclang" ;;
esac
echo "rust-toolchain: carried mode (the kernel has no usable Rust) needs:$missing" >&2
echo "rust-toolchain: on ${PRETTY_NAME:-this system} install: $pkgs" >&2
exit 1
