#!/bin/sh
# driver-includes.sh DRIVER_SRC KREL OUT: the kernel headers that an installed
# NVIDIA driver's nv-p2p.c includes itself (not through another kernel
# header), in its order, written to OUT as #include lines, for the GPU
# simulator built as that driver's stand-in (tests/sim/Kbuild,
# NVPM_SIM_KERNEL_INCLUDES).
#
# Why: genksyms expands a struct into a CRC only where the compiled unit
# defines it. The exports that reach struct pci_dev (dma_map_pages,
# dma_unmap_pages, free_dma_mapping) get the driver's CRCs only when the
# simulator's unit defines the same kernel structs, that is, includes the
# same kernel headers first.
#
# How: the driver's own kbuild compiles nv-p2p.o for KREL (its conftest
# first, as DKMS's build does: about 2 minutes), then the same compiler
# command runs with -H, which prints every header with its depth; a kernel
# header whose includer is a driver file is one of the driver's own.
# Runs in the root where the driver's DKMS source is installed.
set -eu
src=$1 krel=$2 out=$3
build=/lib/modules/$krel/build
sources=/lib/modules/$krel/source
[ -d "$sources" ] || sources=$build
case $(dpkg --print-architecture) in
amd64) arch=x86 ;;
arm64) arch=arm64 ;;
*) echo "driver-includes: no kernel ARCH for $(dpkg --print-architecture)" >&2; exit 1 ;;
esac
[ -f "$src/nvidia/nv-p2p.c" ] || { echo "driver-includes: no nvidia/nv-p2p.c in $src" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -a "$src" "$work/src"
make -s -C "$build" M="$work/src" ARCH=$arch NV_KERNEL_SOURCES="$sources" NV_KERNEL_OUTPUT="$build" \
	NV_KERNEL_MODULES=nvidia nvidia/nv-p2p.o >"$work/build.log" 2>&1 ||
	{ tail -n 20 "$work/build.log" >&2; echo "driver-includes: the driver's nv-p2p.o did not build for $krel" >&2; exit 1; }
# The command line kbuild saved: savedcmd_ (newer kernels) or cmd_ (6.1).
cmd=$(sed -n 's/^\(saved\)\{0,1\}cmd_[^ ]* := //p' "$work/src/nvidia/.nv-p2p.o.cmd")
[ -n "$cmd" ] || { echo "driver-includes: no compiler command in .nv-p2p.o.cmd" >&2; exit 1; }
# The compiler's command only: 6.1 appends objtool's after a ';'.
cmd=$(printf '%s\n' "$cmd" | sed 's/;.*//; s/ -o [^ ]*//; s/-Wp,-MMD,[^ ]*//')
(cd "$build" && eval "$cmd -H -fsyntax-only") 2>"$work/tree" ||
	{ grep -v '^\.' "$work/tree" | tail -n 10 >&2; echo "driver-includes: the compiler's -H pass failed" >&2; exit 1; }
# Kernel headers are those under the headers' trees, or relative to the
# build directory (./arch/..., generated); their -I roots come off.
awk -v c="$work/src/nvidia/nv-p2p.c" '
	function kernel(p) { return p ~ /^(\/usr\/src\/linux-|\.\/)/ }
	/^\.+ / {
		d = length($1); at[d] = $2
		from = d == 1 ? c : at[d - 1]
		if (kernel($2) && !kernel(from) && !seen[$2]++) print $2
	}' "$work/tree" |
	sed -E 's|^/usr/src/linux-[^/]*/||; s|^\./||
		s#^(arch/[^/]+/include/generated/uapi|arch/[^/]+/include/generated|arch/[^/]+/include/uapi|arch/[^/]+/include|include/uapi|include)/##
		s/.*/#include <&>/' >"$out"
n=$(wc -l <"$out")
[ "$n" -gt 0 ] || { echo "driver-includes: no kernel header found in the -H tree" >&2; exit 1; }
echo "driver-includes: $n kernel headers from $src/nvidia/nv-p2p.c for $krel"
