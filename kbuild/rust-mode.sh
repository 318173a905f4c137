#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# rust-mode.sh: how nvidia_peermem gets the kernel's Rust support for the
# kernel tree KDIR: "kernel" (the kernel's own compiled crates) or "carried"
# (compiled into the module, kbuild/carried.mk). Prints the mode on stdout,
# and on stderr the reason when it is "carried".
#
# Usage: rust-mode.sh KDIR [auto|kernel|carried]   (default auto)
#
# auto: "kernel" where the kernel has CONFIG_RUST=y, its crates are present
# (rust/libkernel.rmeta, and scripts/target.json where the architecture's
# Makefile hands rustc one: x86, not arm64) and new enough for this module
# (the ffi crate, rust/libffi.rmeta, which Linux 6.13 added; Ubuntu 24.04's
# 6.8 has Rust and older crates) and the rustc on PATH is the one
# that built them (CONFIG_RUSTC_VERSION_TEXT), otherwise "carried". Forcing
# "kernel" where that does not hold exits 1 with the reason.
# Env: RUSTC (default rustc).
set -eu
kdir=$1
want=${2:-auto}
rustc=${RUSTC:-rustc}

config=
for f in "$kdir/include/config/auto.conf" "$kdir/.config"; do
	[ -r "$f" ] && { config=$f; break; }
done
[ -n "$config" ] || { echo "rust-mode: $kdir has no .config or include/config/auto.conf: not a configured kernel tree" >&2; exit 1; }

# The arch Makefile kbuild reads for KDIR: in the tree, or in the source
# tree that a headers or output directory's Makefile includes (Debian's
# flavour headers: "include /usr/src/linux-headers-<ver>-common/Makefile";
# O= builds: also source/).
arch_makefile() { # $1 = tree, $2 = SRCARCH
	for d in "$1" "$1/source" "$(sed -n 's|^include \(/.*\)/Makefile$|\1|p' "$1/Makefile" 2>/dev/null | head -n 1)"; do
		[ -n "$d" ] && [ -f "$d/arch/$2/Makefile" ] && { echo "$d/arch/$2/Makefile"; return 0; }
	done
	return 1
}

# The compiled crates, and the target spec where the kernel's rustc reads one
# (arch/<arch>/Makefile names scripts/target.json; arm64 uses rustc's own
# aarch64-unknown-none targets). Without the arch Makefile, both.
crates=rust/libkernel.rmeta
srcarch=$(sed -n -e 's/^CONFIG_X86=y$/x86/p' -e 's/^CONFIG_ARM64=y$/arm64/p' "$config")
if [ -z "$srcarch" ] || ! arch_mk=$(arch_makefile "$kdir" "$srcarch") || grep -qs 'scripts/target\.json' "$arch_mk"; then
	crates="$crates scripts/target.json"
fi
missing=
for f in $crates; do [ -f "$kdir/$f" ] || missing=y; done

why=
if ! grep -q '^CONFIG_RUST=y' "$config"; then
	why="the kernel is built without Rust (CONFIG_RUST is not set)"
elif [ -n "$missing" ]; then
	why="the kernel's compiled Rust crates are not in $kdir ($(echo "$crates" | sed 's/ /, /g'))"
elif [ ! -f "$kdir/rust/libffi.rmeta" ]; then
	why="the kernel's Rust crates in $kdir are older than this module needs (no ffi crate, rust/libffi.rmeta: Linux 6.13 and later have it)"
else
	need=$(sed -n -e 's/^CONFIG_RUSTC_VERSION_TEXT="\(.*\)"$/\1/p' -e 't' -e 's/^CONFIG_RUSTC_VERSION_TEXT=\(.*\)$/\1/p' "$config")
	have=$("$rustc" --version 2>/dev/null || true)
	[ "$need" = "$have" ] || why="its crates were built by '$need', the rustc here is '${have:-missing}'"
fi

case $want in
auto)
	if [ -z "$why" ]; then echo kernel; else
		echo "rust-mode: carried: $why" >&2
		echo carried
	fi ;;
kernel)
	[ -z "$why" ] || { echo "rust-mode: NVPM_RUST=kernel is not possible for $kdir: $why" >&2; exit 1; }
	echo kernel ;;
carried) echo carried ;;
*) echo "rust-mode: NVPM_RUST=$want: expected auto, kernel or carried" >&2; exit 1 ;;
esac
