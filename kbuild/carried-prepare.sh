#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# carried-prepare.sh: the part of the pinned release's `kernel` crate that
# nvidia_peermem uses, for carried mode (kbuild/carried.mk).
#
# Usage: carried-prepare.sh PINNED_RUST_DIR OUT_DIR
#
# Copies PINNED_RUST_DIR/kernel to OUT_DIR/kernel and leaves out (with
# `#[cfg(any())]`, the attribute that is never true) the modules this module
# does not use: drivers, buses, file systems, DRM, networking. What stays
# needs only the C functions and types of the kernel's core (locks, wait
# queues, the allocator, printk, tasks, time), which every kernel we build
# for has; their bindings come from kbuild/carried/bindings_helper.h.
set -eu
src=$1
out=$2

# Top-level modules of kernel/lib.rs this module's code reaches, directly or
# through the kept modules.
keep_lib="alloc bits bug build_assert error fmt init interrupt module num page pid_namespace
	prelude print ptr safety sizes std_vendor str sync task time transmute types"
# Submodules of kernel/sync.rs that need nothing outside the kept set.
keep_sync="arc aref atomic barrier completion condvar lock locked_by rcu refcount set_once"

rm -rf "$out/kernel.tmp"
mkdir -p "$out"
cp -r "$src/kernel" "$out/kernel.tmp"
find "$out/kernel.tmp" -type f ! -name '*.rs' ! -name '*.rs.S' -delete

# prune FILE KEEP...: every `mod X;` and `pub use X::...`/`pub use self::X::...`
# item of FILE whose X is not in KEEP gets `#[cfg(any())]`.
prune() {
	file=$1
	shift
	mods=$(sed -n 's/^\(pub \)\{0,1\}mod \([a-z_0-9]*\);$/\2/p' "$file")
	for m in $mods; do
		case " $(echo "$*" | tr '\n\t' '  ') " in *" $m "*) continue ;; esac
		sed -i -e "s/^\(\(pub \)\{0,1\}mod $m;\)$/#[cfg(any())]\n\1/" \
			-e "s/^\(pub use \(self::\)\{0,1\}$m::.*\)$/#[cfg(any())]\n\1/" "$file"
	done
}
prune "$out/kernel.tmp/lib.rs" $keep_lib
prune "$out/kernel.tmp/sync.rs" $keep_sync
# time.rs: hrtimers (their C API changed in 6.15) are not used.
prune "$out/kernel.tmp/time.rs" delay

# cut FILE LINE: `#[cfg(any())]` before the item that starts at the line
# equal to LINE (after its doc comments and attributes).
cut() {
	grep -qxF "$2" "$1" || { echo "carried-prepare: $1 has no line '$2'" >&2; exit 1; }
	awk -v line="$2" '$0 == line { print "#[cfg(any())]" } { print }' "$1" >"$1.cut"
	mv "$1.cut" "$1"
}
# page.rs: copying from user memory needs uaccess (and through it dma, fs).
sed -i '/^    uaccess::UserSliceReader, \/\/$/d' "$out/kernel.tmp/page.rs"
cut "$out/kernel.tmp/page.rs" '    pub unsafe fn copy_from_user_slice_raw('
# task.rs: a task's address space needs mm (and through it VMAs, page tables).
sed -i '/^    mm::MmWithUser,$/d' "$out/kernel.tmp/task.rs"
cut "$out/kernel.tmp/task.rs" '    pub fn mm(&self) -> Option<&MmWithUser> {'

# uapi's bindings (the kernel's user-space ABI headers) are not built.
sed -i 's/^pub use uapi;$/#[cfg(any())]\npub use uapi;/' "$out/kernel.tmp/lib.rs"

# The prelude names items of left-out modules (device's dev_* macros,
# uaccess::UserPtr) inside one `pub use super::{...}`: drop those names.
sed -i -e '/^    dev_[a-z]*,$/d' -e '/^    uaccess::UserPtr,$/d' "$out/kernel.tmp/prelude.rs"

rm -rf "$out/kernel"
mv "$out/kernel.tmp" "$out/kernel"
