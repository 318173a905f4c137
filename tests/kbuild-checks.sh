#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# kbuild-checks.sh: the build's choice of Rust mode and its refusals, on a
# kernel without Rust and one with it (part of tests/kernels.sh). Each bad
# input must stop with a message that says what is wrong, and change nothing.
# Usage: kbuild-checks.sh NO_RUST_KDIR RUST_KDIR    (host paths)
# Ends with KBUILD-SUMMARY.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
norust=$1 rust=$2
pass=0 fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# check NAME WANT_RC PATTERN CMD...: CMD exits WANT_RC and its output matches PATTERN.
check() {
	local name=$1 want=$2 pattern=$3 out rc
	shift 3
	out=$("$@" 2>&1)
	rc=$?
	if [ "$rc" = "$want" ] && grep -qE -- "$pattern" <<<"$out"; then
		echo "PASS kbuild/$name"
		pass=$((pass + 1))
	else
		echo "FAIL kbuild/$name: exit $rc (wanted $want), output: $(head -c 300 <<<"$out")"
		fail=$((fail + 1))
	fi
}

check mode-auto-norust 0 '^carried$' kbuild/rust-mode.sh "$norust"
check mode-auto-norust-why 0 'CONFIG_RUST is not set' kbuild/rust-mode.sh "$norust"
check mode-kernel-refused 1 'NVPM_RUST=kernel is not possible .*CONFIG_RUST is not set' kbuild/rust-mode.sh "$norust" kernel
check mode-carried-forced 0 '^carried$' kbuild/rust-mode.sh "$rust" carried
check mode-bad-value 1 'NVPM_RUST=cargo: expected auto, kernel or carried' kbuild/rust-mode.sh "$norust" cargo
check mode-not-a-tree 1 'not a configured kernel tree' kbuild/rust-mode.sh "$tmp"
# The Rust kernel's crates were built by the root's rustc, not by this one.
check mode-other-rustc 0 "its crates were built by 'rustc 1\.85" env RUSTC=/bin/false kbuild/rust-mode.sh "$rust"
# Crates older than this module needs (as Ubuntu 24.04's 6.8 has with Rust):
# without the ffi crate auto takes carried mode, and kernel mode is refused.
mkdir -p "$tmp/old/rust" "$tmp/old/scripts"
for f in "$rust/include/config/auto.conf" "$rust/.config"; do
	[ -r "$f" ] && { cp "$f" "$tmp/old/.config"; break; }
done
touch "$tmp/old/rust/libkernel.rmeta" "$tmp/old/scripts/target.json"
check mode-old-crates 0 '^carried$' kbuild/rust-mode.sh "$tmp/old"
check mode-old-crates-why 0 'older than this module needs \(no ffi crate' kbuild/rust-mode.sh "$tmp/old"
check mode-old-crates-kernel-refused 1 'NVPM_RUST=kernel is not possible .*no ffi crate' kbuild/rust-mode.sh "$tmp/old" kernel

# Debian's flavour headers have no arch Makefile of their own: their Makefile
# includes the common headers', which say whether rustc reads a target spec.
# arm64's does not (kernel mode without scripts/target.json); x86's does.
printf '#!/bin/sh\necho "rustc 1.85.1 (test)"\n' >"$tmp/rustc" && chmod +x "$tmp/rustc"
# shellcheck disable=SC2016 # $(objtree) is make's, written as x86's Makefile has it
for a in arm64:ARM64:'--target=aarch64-unknown-none-softfloat' x86:X86:'--target=$(objtree)/scripts/target.json'; do
	IFS=: read -r arch opt flag <<<"$a"
	mkdir -p "$tmp/$arch-common/arch/$arch" "$tmp/$arch/rust"
	echo "KBUILD_RUSTFLAGS += $flag" >"$tmp/$arch-common/arch/$arch/Makefile"
	echo "include $tmp/$arch-common/Makefile" >"$tmp/$arch/Makefile"
	printf 'CONFIG_RUST=y\nCONFIG_%s=y\nCONFIG_RUSTC_VERSION_TEXT="rustc 1.85.1 (test)"\n' "$opt" >"$tmp/$arch/.config"
	touch "$tmp/$arch/rust/libkernel.rmeta" "$tmp/$arch/rust/libffi.rmeta"
done
check mode-arm64-debian-headers 0 '^kernel$' env RUSTC="$tmp/rustc" kbuild/rust-mode.sh "$tmp/arm64"
check mode-x86-debian-headers-no-spec 0 'not in .*scripts/target\.json' env RUSTC="$tmp/rustc" kbuild/rust-mode.sh "$tmp/x86"

# The pinned sources: a changed file is refused and the copy left as it was.
cp -r build/carried-src "$tmp/src"
check source-verified 0 '' kbuild/carried-source.sh --verify "$tmp/src"
# The pin's minimum rustc and bindgen are the sources' own: a stale one (in
# a copy of kbuild/) is refused, naming the value to pin; rust-toolchain.sh
# reads the pin's.
mkdir -p "$tmp/top" && cp -r kbuild "$tmp/top/"
sed -i 's/^CARRIED_RUSTC_MIN=.*/CARRIED_RUSTC_MIN=1.86.0/' "$tmp/top/kbuild/carried.pin"
check source-stale-minimum 1 'CARRIED_RUSTC_MIN=1\.86\.0, but .* names rustc 1\.85\.0: set CARRIED_RUSTC_MIN=1\.85\.0' \
	"$tmp/top/kbuild/carried-source.sh" --verify "$tmp/src"
check toolchain-minimum-pinned 1 'needs: rustc>=1\.86\.0' \
	env RUSTC=/nonexistent BINDGEN=/nonexistent OS_RELEASE=/nonexistent "$tmp/top/kbuild/rust-toolchain.sh"
echo '// changed' >>"$tmp/src/rust/kernel/sync.rs"
before=$(sha256sum "$tmp/src/rust/kernel/sync.rs")
check source-changed-refused 1 '' kbuild/carried-source.sh --verify "$tmp/src"
check source-changed-kept 0 '' test "$(sha256sum "$tmp/src/rust/kernel/sync.rs")" = "$before"
check source-usage 2 'usage: carried-source.sh' kbuild/carried-source.sh --bogus

# The toolchain: what is missing is named with the packages to install.
printf 'ID=debian\nVERSION_ID=12\nPRETTY_NAME="Debian 12"\n' >"$tmp/os-release"
check toolchain-no-bindgen 1 'needs:.*bindgen>=0\.71\.1' \
	env BINDGEN=/nonexistent OS_RELEASE="$tmp/os-release" kbuild/rust-toolchain.sh
check toolchain-debian12-names 1 'install: rustc-web rust-web-src .*cargo install --locked bindgen-cli@0\.71\.1' \
	env BINDGEN=/nonexistent OS_RELEASE="$tmp/os-release" kbuild/rust-toolchain.sh
printf 'ID=debian\nVERSION_ID=11\nPRETTY_NAME="Debian 11"\n' >"$tmp/os-release-11"
check toolchain-debian11-names 1 'on Debian 11 install: rustc-web rust-web-src .*not in Debian 11: cargo install --locked bindgen-cli@0\.71\.1' \
	env BINDGEN=/nonexistent OS_RELEASE="$tmp/os-release-11" kbuild/rust-toolchain.sh
check toolchain-no-rustc 1 'needs: rustc>=1\.85\.0' \
	env RUSTC=/nonexistent BINDGEN=/nonexistent OS_RELEASE="$tmp/os-release" kbuild/rust-toolchain.sh
check toolchain-no-os-release 1 'on this system install: rustc >= 1\.85\.0 with its rust-src, bindgen >= 0\.71\.1, libclang' \
	env RUSTC=/nonexistent BINDGEN=/nonexistent OS_RELEASE="$tmp/none" kbuild/rust-toolchain.sh
# bindgen from cargo, where apt's PATH for DKMS (/usr/sbin:/usr/bin:/sbin:/bin)
# does not reach: found past an older one on PATH; one on PATH new enough
# comes first.
mkdir -p "$tmp/old" "$tmp/home/.cargo/bin"
printf '#!/bin/sh\necho "bindgen 0.60.1"\n' >"$tmp/old/bindgen"
printf '#!/bin/sh\necho "bindgen 0.71.1"\n' >"$tmp/home/.cargo/bin/bindgen"
chmod +x "$tmp/old/bindgen" "$tmp/home/.cargo/bin/bindgen"
check toolchain-bindgen-from-cargo 0 "^(/usr/local/bin/bindgen|$tmp/home/\.cargo/bin/bindgen)\$" \
	env PATH="$tmp/old:/usr/bin:/bin" HOME="$tmp/home" kbuild/rust-toolchain.sh --bindgen
check toolchain-bindgen-path-first 0 '^bindgen$' \
	env PATH="$tmp/home/.cargo/bin:/usr/bin:/bin" HOME="$tmp/home" kbuild/rust-toolchain.sh --bindgen

# The kernel's release: DKMS's KERNELRELEASE, else the tree's utsrelease.h,
# which Debian 12's headers disagree with `make kernelrelease` about.
mkdir -p "$tmp/rel/include/generated"
printf '#define UTS_RELEASE "6.1.0-99-amd64"\n' >"$tmp/rel/include/generated/utsrelease.h"
printf 'kernelrelease:\n\t@echo 6.1.199\n' >"$tmp/rel/Makefile"
check release-utsrelease 0 ' /lib/modules/6\.1\.0-99-amd64/extra/' make -n --no-print-directory KDIR="$tmp/rel" install
check release-dkms 0 ' /lib/modules/9\.9-dkms/extra/' make -n --no-print-directory KDIR="$tmp/rel" KERNELRELEASE=9.9-dkms install

# The build itself refuses without the pinned sources, before any compiling.
check build-no-carried-src 2 'carried mode needs the pinned Rust sources in /nonexistent' \
	make --no-print-directory KDIR="$norust" NVPM_CARRIED_SRC=/nonexistent module
check build-bad-mode 2 'NVPM_RUST=cargo cannot build' make --no-print-directory KDIR="$norust" NVPM_RUST=cargo module

echo "KBUILD-SUMMARY $pass passed, $fail failed"
[ "$fail" = 0 ]
