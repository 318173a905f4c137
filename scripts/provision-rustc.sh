#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# provision-rustc.sh: a second Rust toolchain in the trixie root, other than
# the one Debian's kernels were built with, for the test of carried mode on
# a Rust kernel with another rustc (tests/kernels/run.sh). Debian 13's rustc-web
# (with its rust-src and LLVM) conflicts with its rustc, so it is unpacked
# under /opt/rustc-web, beside it, with a wrapper: /opt/rustc-web/rustc.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
[ -x "$CHROOT/usr/bin/apt-get" ] || scripts/provision.sh
enter_private_namespace "$@"
chroot_mount
exec 9>"$NVPM_CACHE/.lock-rustc"
flock 9
dir=$CHROOT/opt/rustc-web
if [ ! -e "$dir/.complete" ]; then
	rm -rf "$dir" && mkdir -p "$dir/debs"
	std=$(in_chroot apt-cache depends libstd-rust-web-dev | sed -n 's/.*Depends: \(libstd-rust-web-[0-9.]*\)$/\1/p' | head -n 1)
	llvm=$(in_chroot apt-cache depends "$std" | sed -n 's/.*Depends: \(libllvm[0-9]*\)$/\1/p' | head -n 1)
	[ -n "$std" ] && [ -n "$llvm" ] || die "cannot tell rustc-web's libstd and LLVM packages"
	log "downloading Debian's rustc-web, $std, its rust-src and $llvm"
	in_chroot sh -c "cd /opt/rustc-web/debs && apt-get download -qq -o APT::Sandbox::User=root \
		rustc-web libstd-rust-web-dev $std rust-web-src $llvm" || die "apt-get download of rustc-web failed"
	for d in "$dir"/debs/*.deb; do dpkg-deb -x "$d" "$dir"; done
	printf '#!/bin/sh\nLD_LIBRARY_PATH=/opt/rustc-web/usr/lib/x86_64-linux-gnu exec /opt/rustc-web/usr/bin/rustc "$@"\n' >"$dir/rustc"
	chmod +x "$dir/rustc"
	in_chroot /opt/rustc-web/rustc --version >/dev/null || die "the unpacked rustc-web does not run"
	touch "$dir/.complete"
fi
in_chroot /opt/rustc-web/rustc --version
