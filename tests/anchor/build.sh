#!/usr/bin/env bash
# Builds the anchor: NVIDIA's own, unmodified nvidia-peermem.c from Debian's
# nvidia-open-kernel-source (trixie contrib), against the simulators, for the
# `anchor` suite and `make bench` (tests/anchor/README.md).
#
# Runs inside the trixie root (repo at /src) after `make sims`. The package
# comes from the archive the root's own apt sources name (scripts/lib.sh took
# it from the machine's), with contrib added in a private apt state under the
# cache; only the driver tarball's nvidia-peermem/ and the two conftest files
# it needs are kept, under ANCHOR_CACHE/VERSION/ (the .deb is deleted).
# The build defines what NVIDIA's conftest would: its own conftest.sh runs
# the one test nvidia-peermem registers (ib_peer_memory_symbols) against the
# simulators' Module.symvers standing in for MOFED's.
#
# Env: KDIR, KMAKE_FLAGS (kernel.env); ANCHOR_VERSION pins a package version
# (default: the newest in trixie contrib, looked up at most once a day, the
# newest cached one when the archive cannot be reached), or names a tree
# tests/anchor/from-git.sh put in the cache (git-VERSION-COMMIT: NVIDIA's
# repository, never fetched here); ANCHOR_CACHE (default
# /var/cache/nvpm-anchor, inside the root, i.e. under $NVPM_CACHE).
# With --fetch: only the fetch, then the sources' directory on stdout (the
# packaging suite builds the GPU simulator from its nv-p2p.h, another
# driver's). Output (ANCHOR_OUT, default build/anchor): nvidia_peermem.ko and anchor.env
# (ANCHOR_PKG_VERSION: the cache key; ANCHOR_ORIGIN: where the sources came
# from; ANCHOR_VERSION: the module's own version string; ANCHOR_PAS_PARAM: 1
# when it has persistent_api_support (560 and later); ANCHOR_PT_ABI: the
# page-table ABI of its nv-p2p.h, 1.2 or 2.0, which the GPU simulator is
# given).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${KDIR:?}"
CACHE=${ANCHOR_CACHE:-/var/cache/nvpm-anchor}
PKG=nvidia-open-kernel-source
OUT=${ANCHOR_OUT:-build/anchor}
log() { printf 'anchor: %s\n' "$*" >&2; }
die() { printf 'anchor: error: %s\n' "$*" >&2; exit 1; }

# A private apt state with trixie contrib, on the root's archive.
APT=$CACHE/apt
mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial"
uri=$(awk '$1 == "deb" && $3 == "trixie" { print $2; exit }' /etc/apt/sources.list)
[ -n "$uri" ] || die "no 'deb URI trixie' line in the root's /etc/apt/sources.list"
echo "deb $uri trixie contrib" >"$APT/sources.list"
aptopts=(-o "Dir::Etc::SourceList=$APT/sources.list" -o Dir::Etc::SourceParts=- -o "Dir::State::Lists=$APT/lists"
	-o "Dir::Cache=$APT/cache" -o APT::Sandbox::User=root -o Debug::NoLocking=1)

# Packages only: a tree from-git.sh imported is used when named, never by default.
cached_versions() { ls -d "$CACHE"/*/src/nvidia-peermem/nvidia-peermem.c 2>/dev/null | sed "s|^$CACHE/||; s|/src/.*||" | grep -v '^git-' | sort -V; }

ver=${ANCHOR_VERSION:-}
if [ -z "$ver" ]; then
	if [ -z "$(find "$APT/lists/.updated" -mmin -1440 2>/dev/null)" ]; then
		if apt-get -qq "${aptopts[@]}" update >"$APT/update.log" 2>&1; then
			touch "$APT/lists/.updated"
		else
			log "warning: the archive's contrib index could not be fetched (see $APT/update.log)"
		fi
	fi
	ver=$(apt-cache "${aptopts[@]}" madison "$PKG" 2>/dev/null | awk -F'|' '{ gsub(/ /, "", $2); print $2 }' | sort -V | tail -n1)
	[ -n "$ver" ] || ver=$(cached_versions | tail -n1)
	[ -n "$ver" ] || die "no $PKG in trixie contrib and none cached"
fi
SRC=$CACHE/$ver/src
if [ ! -e "$SRC/.complete" ]; then
	case $ver in git-*) die "$SRC is not complete: import it with tests/anchor/from-git.sh (make check-anchor ANCHOR_GIT=...)" ;; esac
	log "fetching $PKG $ver"
	tmp=$CACHE/$ver/tmp
	rm -rf "$SRC" "$tmp" && mkdir -p "$tmp/x" "$SRC"
	(cd "$tmp" && apt-get -qq "${aptopts[@]}" download "$PKG=$ver") >"$tmp/download.log" 2>&1 ||
		die "apt-get download $PKG=$ver failed: $(tail -n 3 "$tmp/download.log")"
	deb=$(ls "$tmp"/*.deb)
	sha256sum "$deb" | sed "s|  .*/|  |" >"$SRC/deb.sha256"
	dpkg-deb -x "$deb" "$tmp/x"
	tarball=$(ls "$tmp"/x/usr/src/nvidia-open-kernel.tar.*)
	top=modules/nvidia-open-kernel
	tar -xf "$tarball" -C "$tmp" "$top/nvidia-peermem" "$top/conftest.sh" "$top/common/inc/conftest.h" "$top/Kbuild"
	mv "$tmp/$top/nvidia-peermem" "$tmp/$top/conftest.sh" "$SRC/"
	mkdir -p "$SRC/common/inc" && mv "$tmp/$top/common/inc/conftest.h" "$SRC/common/inc/"
	# The module's version string, as NVIDIA's top-level Kbuild passes it.
	sed -n 's/.*-DNV_VERSION_STRING=\\"\([^\\]*\)\\".*/\1/p' "$tmp/$top/Kbuild" >"$SRC/version"
	[ -s "$SRC/version" ] || die "no NV_VERSION_STRING in the package's Kbuild"
	echo "$PKG $ver" >"$SRC/origin"
	rm -rf "$tmp"
	touch "$SRC/.complete"
fi
if [ "${1:-}" = --fetch ]; then
	echo "$SRC"
	exit 0
fi
[ -s tests/sim/Module.symvers ] || die "tests/sim/Module.symvers missing: run make sims first"
nvver=$(cat "$SRC/version")
origin=$(cat "$SRC/origin" 2>/dev/null || echo "$PKG $ver")
# What the simulators must match: the module's parameter (560 and later:
# persistent_api_support, default 1, one persistent nv_mem) and the
# page-table ABI of the nv-p2p.h it is built with (0x00010002: 1.2, up to
# 575; 0x00020000: 2.0, 580 and later).
pas=0
! grep -q 'module_param(persistent_api_support' "$SRC/nvidia-peermem/nvidia-peermem.c" || pas=1
ptv=$(sed -n 's/^#define NVIDIA_P2P_PAGE_TABLE_VERSION[[:space:]]*(\{0,1\}\(0x[0-9a-fA-F]*\).*/\1/p' "$SRC/nvidia-peermem/nv-p2p.h")
case $ptv in
0x0001*) ptabi=1.2 ;;
0x0002*) ptabi=2.0 ;;
*) die "nv-p2p.h: NVIDIA_P2P_PAGE_TABLE_VERSION '$ptv' is neither 1.x nor 2.x" ;;
esac

# The build: a copy of the sources (never modified), the conftest headers
# NVIDIA's Kbuild would generate, and a Kbuild with the flags of its own.
B=$CACHE/$ver/build
rm -rf "$B" && mkdir -p "$B/conftest" "$B/mofed"
cp -r "$SRC/nvidia-peermem" "$SRC/common" "$B/"
cp tests/sim/Module.symvers "$B/mofed/Module.symvers"
for h in headers functions generic macros symbols types; do : >"$B/conftest/$h.h"; done
# nvidia-peermem.Kbuild registers one conftest: ib_peer_memory_symbols.
tests=$(sed -n 's/^NV_CONFTEST_GENERIC_COMPILE_TESTS += //p' "$SRC/nvidia-peermem/nvidia-peermem.Kbuild")
[ "$tests" = ib_peer_memory_symbols ] || die "nvidia-peermem.Kbuild asks for conftests '$tests', not only ib_peer_memory_symbols"
# conftest.sh CC ARCH SOURCES OUTPUT compile_tests CFLAGS TEST: OUTPUT is where it
# looks for the Module.symvers exporting ib_register_peer_memory_client.
sh "$SRC/conftest.sh" cc x86_64 "$KDIR" "$B/mofed" compile_tests '' $tests >"$B/conftest/generic.h"
grep -qx '#define NV_MLNX_IB_PEER_MEM_SYMBOLS_PRESENT' "$B/conftest/generic.h" ||
	die "NVIDIA's conftest did not find the peer-memory symbols in the simulators' Module.symvers"
cat >"$B/Kbuild" <<EOF
# Written by tests/anchor/build.sh: nvidia-peermem.Kbuild's module and flags,
# with those of NVIDIA's top-level Kbuild that apply to it.
obj-m := nvidia-peermem.o
nvidia-peermem-y := nvidia-peermem/nvidia-peermem.o
ccflags-y += -I\$(src)/common/inc -I\$(src) -I\$(src)/nvidia-peermem
ccflags-y += -UDEBUG -U_DEBUG -DNDEBUG -DNV_BUILD_MODULE_INSTANCES=0
ccflags-y += -Wall -Wno-cast-qual -Wno-format-extra-args -Wno-unused-function -Wno-error
ccflags-y += -D__KERNEL__ -DMODULE -DNVRM -DNV_VERSION_STRING=\\"$nvver\\"
ccflags-y += -DNV_FILESYSTEM_ACCESS_AVAILABLE=1 -DNV_KERNEL_INTERFACE_LAYER -fno-strict-aliasing -ffreestanding
EOF
log "building nvidia-peermem $nvver ($origin) against the simulators"
# shellcheck disable=SC2086 # KMAKE_FLAGS is words
make -s -C "$KDIR" M="$B" ${KMAKE_FLAGS:-} KBUILD_EXTRA_SYMBOLS="$B/mofed/Module.symvers" modules >"$B/build.log" 2>&1 ||
	die "the build failed: $(tail -n 20 "$B/build.log")"
mkdir -p "$OUT"
cp "$B/nvidia-peermem.ko" "$OUT/nvidia_peermem.ko"
printf 'ANCHOR_PKG_VERSION=%s\nANCHOR_ORIGIN="%s"\nANCHOR_VERSION=%s\nANCHOR_PAS_PARAM=%s\nANCHOR_PT_ABI=%s\n' \
	"$ver" "$origin" "$nvver" "$pas" "$ptabi" >"$OUT/anchor.env"
log "$OUT/nvidia_peermem.ko: nvidia-peermem $nvver (persistent_api_support: $([ $pas = 1 ] && echo yes || echo no), page tables $ptabi)"
