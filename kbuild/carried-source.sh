#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# carried-source.sh: the pinned kernel release's Rust sources that carried
# mode builds (kbuild/carried.mk), taken from Debian's linux-source package of
# that release and checked against the pinned checksum (kbuild/carried.pin).
# Nothing of it is committed: the release tarball and the -dkms package carry
# a copy (build_module.sh), a git checkout fetches it into the cache.
#
# Usage:
#   carried-source.sh DEST            DEST/ gets rust/..., scripts/..., the licences
#   carried-source.sh --verify DIR    exit 0 when DIR holds exactly the pinned files
#                                     and its minimum rustc and bindgen are the pin's
#   carried-source.sh --sum DIR       print DIR's checksum (to pin a new release)
#
# The pin also names the oldest rustc and bindgen the release builds with
# (CARRIED_RUSTC_MIN, CARRIED_BINDGEN_MIN: rust-toolchain.sh and the doctor
# read them there); both the fetch and --verify stop, saying so, where the
# sources' scripts/min-tool-version.sh names others.
#
# The package comes from a provisioned 7.x tree in the cache when one is of
# the pinned release, else from the Debian archive through the trixie root
# (scripts/provision.sh makes it). Env: NVPM_CACHE (scripts/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=kbuild/carried.pin
. kbuild/carried.pin

# The files carried mode reads, relative to the source tree's top.
paths=(rust/Makefile rust/bindgen_parameters rust/build_error.rs rust/compiler_builtins.rs
	rust/ffi.rs rust/bindings/lib.rs rust/helpers rust/kernel rust/macros rust/pin-init
	rust/proc-macro2 rust/quote rust/syn rust/zerocopy rust/zerocopy-derive
	scripts/generate_rust_target.rs scripts/min-tool-version.sh COPYING LICENSES/preferred LICENSES/exceptions)

tree_sum() { # $1 = dir: sha256 over the sorted names and contents of its files
	(cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}

# The architectures carried mode builds for (kbuild/rustflags.mk), as
# SRCARCH:ARCH: scripts/min-tool-version.sh answers per architecture.
arches="x86:x86_64 arm64:arm64"

# check_minima DIR: the pin's minimum rustc and bindgen are the ones DIR's
# scripts/min-tool-version.sh names for every architecture carried mode
# builds for (the pin has one minimum: the toolchain check knows no kernel).
check_minima() {
	local tool var pinned have a
	for tool in rustc bindgen; do
		var=CARRIED_${tool^^}_MIN
		pinned=${!var:-}
		for a in $arches; do
			have=$(SRCARCH=${a%%:*} ARCH=${a#*:} sh "$1/scripts/min-tool-version.sh" "$tool" 2>/dev/null) || have=
			if [ "$have" != "$pinned" ]; then
				echo "carried-source: kbuild/carried.pin has $var=${pinned:-(none)}, but the pinned sources'" \
					"scripts/min-tool-version.sh names $tool ${have:-(nothing)}: set $var=$have in kbuild/carried.pin" \
					"(said for ARCH=${a#*:}; where architectures differ, the pin needs a minimum per architecture)" >&2
				return 1
			fi
		done
	done
}

case ${1:-} in
--sum) tree_sum "$2"; exit 0 ;;
--verify)
	[ -d "$2" ] && [ "$(tree_sum "$2")" = "$CARRIED_SHA256" ] || exit 1
	check_minima "$2"
	exit
	;;
"" | -*) echo "usage: carried-source.sh DEST | --verify DIR | --sum DIR" >&2; exit 2 ;;
esac
dest=$1

if [ -d "$dest" ] && [ "$(tree_sum "$dest")" = "$CARRIED_SHA256" ]; then
	check_minima "$dest"
	exit
fi

# shellcheck source=scripts/lib.sh
. scripts/lib.sh
cached=$NVPM_CACHE/carried-$CARRIED_LINUX
if [ ! -d "$cached" ] || [ "$(tree_sum "$cached")" != "$CARRIED_SHA256" ]; then
	deb=$(ls "$CHROOT"/kernels/*/debs/"$CARRIED_PACKAGE"_"$CARRIED_LINUX"-*_all.deb 2>/dev/null | head -n 1 || true)
	if [ -z "$deb" ]; then
		[ -x "$CHROOT/usr/bin/apt-get" ] || die "carried-source: no trixie root at $CHROOT to fetch $CARRIED_PACKAGE from (run make once)"
		mkdir -p "$CHROOT/carried-debs"
		log "carried-source: downloading $CARRIED_PACKAGE $CARRIED_LINUX"
		ver=$(in_chroot apt-cache madison "$CARRIED_PACKAGE" | awk -F'|' '{gsub(/ /,"",$2); print $2}' |
			grep -m1 "^$CARRIED_LINUX-" || true)
		[ -n "$ver" ] || die "carried-source: the archive has no $CARRIED_PACKAGE of release $CARRIED_LINUX any more; pin a newer release in kbuild/carried.pin"
		in_chroot sh -c "cd /carried-debs && apt-get download -qq -o APT::Sandbox::User=root $CARRIED_PACKAGE=$ver" ||
			die "carried-source: apt-get download of $CARRIED_PACKAGE=$ver failed"
		deb=$(ls "$CHROOT"/carried-debs/"$CARRIED_PACKAGE"_"$ver"_all.deb)
	fi
	log "carried-source: taking the Rust sources of $CARRIED_LINUX from $(basename "$deb")"
	tmp=$cached.tmp
	rm -rf "$tmp" && mkdir -p "$tmp"
	top=linux-source-${CARRIED_LINUX%.*}
	dpkg-deb --fsys-tarfile "$deb" | tar -xO --wildcards "*usr/src/$top.tar.*" |
		tar -xJ -C "$tmp" "${paths[@]/#/$top/}"
	have=$(tree_sum "$tmp/$top")
	[ "$have" = "$CARRIED_SHA256" ] ||
		die "carried-source: $(basename "$deb") does not hold the pinned sources (sha256 $have, pinned $CARRIED_SHA256)"
	rm -rf "$cached" && mv "$tmp/$top" "$cached" && rm -rf "$tmp"
fi
check_minima "$cached" || exit 1
rm -rf "$dest" && mkdir -p "$(dirname "$dest")" && cp -r "$cached" "$dest"
