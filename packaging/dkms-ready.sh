#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# dkms-ready KREL: can DKMS build nvidia_peermem for kernel KREL now? The
# packages' install scripts ask it for each kernel with headers, because
# DKMS keeps a build's output in its make.log and only says to consult it.
# Kernel mode where rust-headers can make the headers Rust-capable (or they
# are), else carried mode, whose toolchain the DKMS tree's
# kbuild/rust-toolchain.sh checks. Exit 0: stdout names the mode; exit 1:
# stderr says what to install.
#
# Env: NVPM_DKMS_TREE (default: the newest /usr/src/nvidia-peer-memory-*).
set -u
krel=${1:?usage: dkms-ready KREL}
libdir=$(dirname "$0")
tree=${NVPM_DKMS_TREE:-$(find /usr/src -maxdepth 1 -type d -name 'nvidia-peer-memory-*' 2>/dev/null | sort -V | tail -n 1)}
config=/lib/modules/$krel/build/.config
[ -f "$config" ] || { echo "dkms-ready: no headers for $krel (/lib/modules/$krel/build)" >&2; exit 1; }
if grep -qx 'CONFIG_RUST=y' "$config" && "$libdir/rust-headers" --dry-run "$krel" >/dev/null 2>&1; then
	echo "$krel: kernel mode (the kernel's own Rust crates)"
	exit 0
fi
[ -x "$tree/kbuild/rust-toolchain.sh" ] || { echo "dkms-ready: no DKMS tree of nvidia-peer-memory (${tree:-/usr/src/nvidia-peer-memory-*})" >&2; exit 1; }
"$tree/kbuild/rust-toolchain.sh" || exit 1
echo "$krel: carried mode (the pinned Rust crates built into the module)"
