#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# /etc/kernel/postrm.d/nvidia-peer-memory: a kernel was removed; drop the
# Rust overlay rust-headers copied into its headers, and its rebuild record.
# $1 = kernel version.
[ -n "${1:-}" ] || exit 0
if [ -x /usr/lib/nvidia-peer-memory/rust-headers ]; then
	/usr/lib/nvidia-peer-memory/rust-headers --remove "$1" >/dev/null 2>&1 || :
fi
rm -f "/var/lib/nvidia-peer-memory/inputs/$1"
exit 0
