#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# build_module.sh: makes the source package of nvidia-peer-memory.
#   Debian-like hosts: nvidia-peer-memory_<ver>.orig.tar.gz, then
#     tar xf it, cp -r debian/ into it, dpkg-buildpackage -us -uc
#   elsewhere: nvidia_peer_memory-<ver>-<rel>.src.rpm, then
#     rpmbuild --rebuild [--without kmod] X.src.rpm
# Both carry the doctor's crates (cargo vendor), so that they build offline,
# and the pinned kernel Rust sources of carried mode (carried-src/).
#
# Usage: build_module.sh [--flavor deb|rpm] [--out DIR]
#   --flavor  deb or rpm (default: deb where dpkg exists; FORCE_FLAVOR too)
#   --out     where to write (default: build/packages)
#
# Reproducible: the same tree gives byte-identical output. File times are
# SOURCE_DATE_EPOCH if set, else the time of the last git commit, else that
# of the VERSION file; names are sorted, owners and modes normalised.
set -eu
cd "$(dirname "$0")"

flavor=${FORCE_FLAVOR:-}
out=build/packages
while [ $# -gt 0 ]; do
	case $1 in
	--flavor) flavor=${2:?--flavor needs deb or rpm}; shift 2 ;;
	--out) out=${2:?--out needs a directory}; shift 2 ;;
	-h | --help) sed -n '4,18s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) echo "build_module.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
if [ -z "$flavor" ]; then
	if command -v dpkg >/dev/null 2>&1 && [ -e /etc/debian_version ]; then flavor=deb; else flavor=rpm; fi
fi
case $flavor in deb | rpm) ;; *) echo "build_module.sh: --flavor must be deb or rpm" >&2; exit 2 ;; esac

version=$(cat VERSION 2>/dev/null) || version=
echo "$version" | grep -Eq '^[0-9]+\.[0-9]+(\.[0-9]+)?$' || { echo "build_module.sh: cannot parse VERSION ('$version')" >&2; exit 1; }
release=$(sed -n 's/^Release:[[:space:]]*\([0-9][0-9a-z.]*\).*/\1/p' rpm/nvidia_peer_memory.spec)
[ -n "$release" ] || { echo "build_module.sh: no Release in rpm/nvidia_peer_memory.spec" >&2; exit 1; }
name=nvidia-peer-memory
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null) || SOURCE_DATE_EPOCH=
	[ -n "$SOURCE_DATE_EPOCH" ] || SOURCE_DATE_EPOCH=$(stat -c %Y VERSION)
fi
export SOURCE_DATE_EPOCH

mkdir -p "$out"
out=$(cd "$out" && pwd)
# A fixed work path: rpmbuild records it in the source rpm's header.
tmp=${TMPDIR:-/tmp}/build_module-$name-$version
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT INT TERM

# The files of the source package: what git tracks (or, outside git, the
# tree without build products); never debian/ (it travels separately),
# tests or CI, except tests/tool/: it is a member of the cargo workspace
# the packages build nvidia-peermem-doctor in (Cargo.toml, Cargo.lock);
# then vendor/ and .cargo/config.toml (below).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git ls-files --cached --others --exclude-standard
else
	find . -path ./.git -prune -o -path ./build -prune -o -path ./target -prune -o -type f -print | sed 's|^\./||'
fi | awk '!/^(debian\/|\.ci\/|\.git)/ && (!/^tests\// || /^tests\/tool\//)' | grep -Ev '\.(o|ko|mod|mod\.c|cmd|a|rmeta|d)$' | LC_ALL=C sort >"$tmp/files"
while IFS= read -r f; do
	[ -f "$f" ] || continue
	mkdir -p "$tmp/$name-$version/$(dirname "$f")"
	cp -p "$f" "$tmp/$name-$version/$f"
done <"$tmp/files"

# The pinned kernel Rust sources carried mode builds (kbuild/carried.pin):
# a dependency, not in git; taken from carried-src/ (a tree made from this
# tarball) or build/carried-src/ (make carried-src) when either holds
# exactly the pinned files, else fetched (kbuild/carried-source.sh).
src=$tmp/$name-$version
if [ ! -d "$src/carried-src" ]; then
	for d in carried-src build/carried-src; do
		if kbuild/carried-source.sh --verify "$d"; then
			cp -pR "$d" "$src/carried-src"
			break
		fi
	done
	[ -d "$src/carried-src" ] || kbuild/carried-source.sh "$src/carried-src" >&2 ||
		{ echo "build_module.sh: the pinned Rust sources of carried mode are missing and could not be fetched (make carried-src)" >&2; exit 1; }
fi
kbuild/carried-source.sh --verify "$src/carried-src" ||
	{ echo "build_module.sh: $src/carried-src does not hold the pinned Rust sources (kbuild/carried.pin)" >&2; exit 1; }
# The crates of Cargo.lock (the doctor's), vendored: the deb and rpm builds
# run cargo offline (--frozen), from vendor/ through .cargo/config.toml.
# cargo vendor takes them from where cargo's configuration says (the
# registry, or a mirror that replaces it), or from its cache when offline.
command -v cargo >/dev/null 2>&1 || { echo "build_module.sh: cargo not found (it vendors the doctor's crates)" >&2; exit 1; }
cargo vendor --quiet --locked --respect-source-config --manifest-path "$src/Cargo.toml" "$src/vendor" >/dev/null ||
	{ echo "build_module.sh: cargo vendor failed (the crates of Cargo.lock are needed once, online or in cargo's cache)" >&2; exit 1; }
mkdir -p "$src/.cargo"
cat >"$src/.cargo/config.toml" <<'EOF'
# Written by build_module.sh: the crates of Cargo.lock are in vendor/, and
# cargo takes them from there (make doctor DOCTOR_CARGO_FLAGS=--frozen).
[source.crates-io]
replace-with = "vendored-sources"

[source.vendored-sources]
directory = "vendor"
EOF

tarball=$tmp/$name-$version.tar.gz
(cd "$tmp" && tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
	--mode='u+rw,go-w,a+rX' --format=gnu -cf - "$name-$version") | gzip -9n >"$tarball"

case $flavor in
deb)
	cp "$tarball" "$out/${name}_$version.orig.tar.gz"
	echo "$out/${name}_$version.orig.tar.gz"
	;;
rpm)
	command -v rpmbuild >/dev/null 2>&1 || { echo "build_module.sh: rpmbuild not found (install rpm / rpm-build)" >&2; exit 1; }
	mkdir -p "$tmp/topdir"
	rpmbuild -ts --nodeps --quiet \
		--define "_topdir $tmp/topdir" --define 'dist %{nil}' \
		--define '_buildhost reproducible' --define 'KVERSION any' --define 'use_source_date_epoch_as_buildtime 1' \
		--define 'build_mtime_policy clamp_to_source_date_epoch' \
		"$tarball" >/dev/null
	srpm=$(find "$tmp/topdir/SRPMS" -name '*.src.rpm' | head -n1)
	[ -n "$srpm" ] || { echo "build_module.sh: rpmbuild made no source rpm" >&2; exit 1; }
	cp "$srpm" "$out/nvidia_peer_memory-$version-$release.src.rpm"
	echo "$out/nvidia_peer_memory-$version-$release.src.rpm"
	;;
esac
