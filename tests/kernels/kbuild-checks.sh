#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# tests/kernels/kbuild-checks.sh: the build's choice of Rust mode and its refusals, on a
# kernel without Rust and one with it (part of the kernels suite). Each bad
# input must stop with a message that says what is wrong, and change nothing.
# Then carried mode's compile tests of kernel APIs on Debian 11's 5.10
# headers (from the cache, in the trixie root), as they are and with APIs
# backported.
# Usage: tests/kernels/kbuild-checks.sh NO_RUST_KDIR RUST_KDIR    (host paths)
# Ends with KBUILD-SUMMARY.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
norust=$1 rust=$2
SUITE=kbuild SUMMARY=KBUILD
# shellcheck source=tests/lib/check.sh
. tests/lib/check.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect_out NAME WANT_RC PATTERN CMD...: CMD exits WANT_RC and its output matches PATTERN.
expect_out() {
	local name=$1 want=$2 pattern=$3 out rc
	shift 3
	out=$("$@" 2>&1)
	rc=$?
	if [ "$rc" = "$want" ] && grep -qE -- "$pattern" <<<"$out"; then
		ok "$name"
	else
		bad "$name" "exit $rc (wanted $want), output: $(head -c 300 <<<"$out")"
	fi
}

expect_out mode-auto-norust 0 '^carried$' kbuild/rust-mode.sh "$norust"
expect_out mode-auto-norust-why 0 'CONFIG_RUST is not set' kbuild/rust-mode.sh "$norust"
expect_out mode-kernel-refused 1 'NVPM_RUST=kernel is not possible .*CONFIG_RUST is not set' kbuild/rust-mode.sh "$norust" kernel
expect_out mode-carried-forced 0 '^carried$' kbuild/rust-mode.sh "$rust" carried
expect_out mode-bad-value 1 'NVPM_RUST=cargo: expected auto, kernel or carried' kbuild/rust-mode.sh "$norust" cargo
expect_out mode-not-a-tree 1 'not a configured kernel tree' kbuild/rust-mode.sh "$tmp"
# The Rust kernel's crates were built by the root's rustc, not by this one.
expect_out mode-other-rustc 0 "its crates were built by 'rustc 1\.85" env RUSTC=/bin/false kbuild/rust-mode.sh "$rust"
# Crates older than this module needs (as Ubuntu 24.04's 6.8 has with Rust):
# without the ffi crate auto takes carried mode, and kernel mode is refused.
mkdir -p "$tmp/old/rust" "$tmp/old/scripts"
for f in "$rust/include/config/auto.conf" "$rust/.config"; do
	[ -r "$f" ] && { cp "$f" "$tmp/old/.config"; break; }
done
touch "$tmp/old/rust/libkernel.rmeta" "$tmp/old/scripts/target.json"
expect_out mode-old-crates 0 '^carried$' kbuild/rust-mode.sh "$tmp/old"
expect_out mode-old-crates-why 0 'older than this module needs \(no ffi crate' kbuild/rust-mode.sh "$tmp/old"
expect_out mode-old-crates-kernel-refused 1 'NVPM_RUST=kernel is not possible .*no ffi crate' kbuild/rust-mode.sh "$tmp/old" kernel

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
expect_out mode-arm64-debian-headers 0 '^kernel$' env RUSTC="$tmp/rustc" kbuild/rust-mode.sh "$tmp/arm64"
expect_out mode-x86-debian-headers-no-spec 0 'not in .*scripts/target\.json' env RUSTC="$tmp/rustc" kbuild/rust-mode.sh "$tmp/x86"

# The pinned sources: a changed file is refused and the copy left as it was.
cp -r build/carried-src "$tmp/src"
expect_out source-verified 0 '' kbuild/carried-source.sh --verify "$tmp/src"
# The pin's minimum rustc and bindgen are the sources' own: a stale one (in
# a copy of kbuild/) is refused, naming the value to pin; rust-toolchain.sh
# reads the pin's.
mkdir -p "$tmp/top" && cp -r kbuild "$tmp/top/"
sed -i 's/^CARRIED_RUSTC_MIN=.*/CARRIED_RUSTC_MIN=1.86.0/' "$tmp/top/kbuild/carried.pin"
expect_out source-stale-minimum 1 'CARRIED_RUSTC_MIN=1\.86\.0, but .* names rustc 1\.85\.0: set CARRIED_RUSTC_MIN=1\.85\.0' \
	"$tmp/top/kbuild/carried-source.sh" --verify "$tmp/src"
expect_out toolchain-minimum-pinned 1 'needs: rustc>=1\.86\.0' \
	env RUSTC=/nonexistent BINDGEN=/nonexistent OS_RELEASE=/nonexistent "$tmp/top/kbuild/rust-toolchain.sh"
echo '// changed' >>"$tmp/src/rust/kernel/sync.rs"
before=$(sha256sum "$tmp/src/rust/kernel/sync.rs")
expect_out source-changed-refused 1 '' kbuild/carried-source.sh --verify "$tmp/src"
expect_out source-changed-kept 0 '' test "$(sha256sum "$tmp/src/rust/kernel/sync.rs")" = "$before"
expect_out source-usage 2 'usage: carried-source.sh' kbuild/carried-source.sh --bogus

# The toolchain: what is missing is named with the packages to install.
printf 'ID=debian\nVERSION_ID=12\nPRETTY_NAME="Debian 12"\n' >"$tmp/os-release"
expect_out toolchain-no-bindgen 1 'needs:.*bindgen>=0\.71\.1' \
	env BINDGEN=/nonexistent OS_RELEASE="$tmp/os-release" kbuild/rust-toolchain.sh
expect_out toolchain-debian12-names 1 'install: rustc-web rust-web-src .*cargo install --locked bindgen-cli@0\.71\.1' \
	env BINDGEN=/nonexistent OS_RELEASE="$tmp/os-release" kbuild/rust-toolchain.sh
printf 'ID=debian\nVERSION_ID=11\nPRETTY_NAME="Debian 11"\n' >"$tmp/os-release-11"
expect_out toolchain-debian11-names 1 'on Debian 11 install: rustc-web rust-web-src .*not in Debian 11: cargo install --locked bindgen-cli@0\.71\.1' \
	env BINDGEN=/nonexistent OS_RELEASE="$tmp/os-release-11" kbuild/rust-toolchain.sh
expect_out toolchain-no-rustc 1 'needs: rustc>=1\.85\.0' \
	env RUSTC=/nonexistent BINDGEN=/nonexistent OS_RELEASE="$tmp/os-release" kbuild/rust-toolchain.sh
expect_out toolchain-no-os-release 1 'on this system install: rustc >= 1\.85\.0 with its rust-src, bindgen >= 0\.71\.1, libclang' \
	env RUSTC=/nonexistent BINDGEN=/nonexistent OS_RELEASE="$tmp/none" kbuild/rust-toolchain.sh
# bindgen from cargo, where apt's PATH for DKMS (/usr/sbin:/usr/bin:/sbin:/bin)
# does not reach: found past an older one on PATH; one on PATH new enough
# comes first.
mkdir -p "$tmp/old" "$tmp/home/.cargo/bin"
printf '#!/bin/sh\necho "bindgen 0.60.1"\n' >"$tmp/old/bindgen"
printf '#!/bin/sh\necho "bindgen 0.71.1"\n' >"$tmp/home/.cargo/bin/bindgen"
chmod +x "$tmp/old/bindgen" "$tmp/home/.cargo/bin/bindgen"
expect_out toolchain-bindgen-from-cargo 0 "^(/usr/local/bin/bindgen|$tmp/home/\.cargo/bin/bindgen)\$" \
	env PATH="$tmp/old:/usr/bin:/bin" HOME="$tmp/home" kbuild/rust-toolchain.sh --bindgen
expect_out toolchain-bindgen-path-first 0 '^bindgen$' \
	env PATH="$tmp/home/.cargo/bin:/usr/bin:/bin" HOME="$tmp/home" kbuild/rust-toolchain.sh --bindgen

# The kernel's release: DKMS's KERNELRELEASE, else the tree's utsrelease.h,
# which Debian 12's headers disagree with `make kernelrelease` about.
mkdir -p "$tmp/rel/include/generated"
printf '#define UTS_RELEASE "6.1.0-99-amd64"\n' >"$tmp/rel/include/generated/utsrelease.h"
printf 'kernelrelease:\n\t@echo 6.1.199\n' >"$tmp/rel/Makefile"
expect_out release-utsrelease 0 ' /lib/modules/6\.1\.0-99-amd64/extra/' make -n --no-print-directory KDIR="$tmp/rel" install
expect_out release-dkms 0 ' /lib/modules/9\.9-dkms/extra/' make -n --no-print-directory KDIR="$tmp/rel" KERNELRELEASE=9.9-dkms install

# The build itself refuses without the pinned sources, before any compiling.
expect_out build-no-carried-src 2 'carried mode needs the pinned Rust sources in /nonexistent' \
	make --no-print-directory KDIR="$norust" NVPM_CARRIED_SRC=/nonexistent module
expect_out build-bad-mode 2 'NVPM_RUST=cargo cannot build' make --no-print-directory KDIR="$norust" NVPM_RUST=cargo module

# Carried mode's kernel APIs by compile test (kbuild/carried/conftest.sh),
# not by version: on Debian 11's 5.10 headers, which have none of them,
# and on a copy of those with three backported under the same
# LINUX_VERSION_CODE, as vendor kernels backport them (atomic_add_negative's
# orderings in linux/atomic.h and kmap_local_page in linux/highmem.h, as
# upstream has them; errname exported in its Module.symvers). kbuild
# preprocesses compat.h with the results for each (build/carried/compat.i)
# in a module tree of its own, in the trixie root (tests/kernels/run.sh
# provisioned 5.10 before this runs).
cache=${NVPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nvidia-peermem-rs}
old='' chroot='' kdir_chroot=''
# shellcheck source=/dev/null disable=SC2153 # the env file's variables
[ -r "$cache/kernel-5.10.env" ] && read -r old chroot kdir_chroot < <(. "$cache/kernel-5.10.env" &&
	echo "$KDIR_HOST $CHROOT $KDIR_CHROOT")
if [ -n "$old" ] && [ -d "$old" ]; then
	ctmp=$(mktemp -d "$PWD/build/kbuild-checks.XXXXXX")
	trap 'rm -rf "$tmp" "$ctmp"' EXIT
	# The headers copied: Debian's flavour tree, and the common tree its
	# Makefile includes; their relative links (scripts, tools) made absolute.
	common=$(sed -n 's/^include \(.*\)\/Makefile$/\1/p' "$old/Makefile")
	cp -a "$old" "$ctmp/kdir"
	if [ -n "$common" ]; then
		cp -a "$chroot$common" "$ctmp/common"
		echo "include /src${ctmp#"$PWD"}/common/Makefile" >"$ctmp/kdir/Makefile"
	fi
	for link in "$ctmp"/kdir/* "$ctmp"/common/*; do
		[ -L "$link" ] || continue
		orig=$(case $link in "$ctmp"/kdir/*) echo "$old" ;; *) echo "$chroot$common" ;; esac)/${link##*/}
		ln -sfn "$(readlink -f "$orig" | sed "s|^$chroot||")" "$link"
	done
	# insert_before FILE LINE: stdin goes into FILE before the line equal to LINE.
	insert_before() {
		awk -v line="$2" -v text="$(cat)" '$0 == line { print text } { print }' "$1" >"$1.new" && mv "$1.new" "$1"
	}
	insert_before "$ctmp/common/include/linux/atomic.h" '#endif /* _LINUX_ATOMIC_H */' <<'EOF'
#define NVPM_TEST_BACKPORT(t, a, o) \
static __always_inline bool a##_add_negative_##o(t i, a##_t *v) { return a##_add_negative(i, v); }
NVPM_TEST_BACKPORT(int, atomic, acquire)
NVPM_TEST_BACKPORT(int, atomic, release)
NVPM_TEST_BACKPORT(int, atomic, relaxed)
NVPM_TEST_BACKPORT(s64, atomic64, acquire)
NVPM_TEST_BACKPORT(s64, atomic64, release)
NVPM_TEST_BACKPORT(s64, atomic64, relaxed)
EOF
	insert_before "$ctmp/common/include/linux/highmem.h" '#endif /* _LINUX_HIGHMEM_H */' <<'EOF'
static inline void *kmap_local_page(struct page *page) { return kmap_atomic(page); }
#define kunmap_local(addr) kunmap_atomic(addr)
EOF
	printf '0x00000000\terrname\tvmlinux\tEXPORT_SYMBOL\t\n' >>"$ctmp/kdir/Module.symvers"
	# conftest NAME KDIR: compat.i for the tree KDIR (a path in the root)
	# in a module tree of its own; prints conftest.h's lines on one line.
	conftest() {
		mkdir -p "$ctmp/$1" && cp -r Kbuild VERSION kbuild "$ctmp/$1/" || return
		# shellcheck disable=SC2016 # expanded inside the root
		NVPM_KERNEL_ENV=kernel-5.10.env scripts/in-chroot.sh sh -c 'make --no-print-directory -C "$1" $KMAKE_FLAGS \
			M="$2" NVPM_RUST_MODE=carried NVPM_CARRIED_SRC=/src/build/carried-src build/carried/compat.i' \
			sh "$2" "/src${ctmp#"$PWD"}/$1" >"$ctmp/$1.log" 2>&1 || { cat "$ctmp/$1.log"; return 1; }
		tr '\n' ' ' <"$ctmp/$1/build/carried/conftest.h"
	}
	expect_out conftest-5.10 0 '^#undef NVPM_HAVE_ATOMIC_ADD_NEGATIVE_ORDERED #undef NVPM_HAVE_KMAP_LOCAL_PAGE #undef NVPM_HAVE__PRINTK #undef NVPM_HAVE_ERRNAME $' \
		conftest stock "$kdir_chroot"
	expect_out conftest-5.10-backported 0 '^#define NVPM_HAVE_ATOMIC_ADD_NEGATIVE_ORDERED 1 #define NVPM_HAVE_KMAP_LOCAL_PAGE 1 #undef NVPM_HAVE__PRINTK #define NVPM_HAVE_ERRNAME 1 $' \
		conftest backported "/src${ctmp#"$PWD"}/kdir"
	expect_out conftest-5.10-backported-version 0 '^#define LINUX_VERSION_CODE 330[0-9]{3}$' \
		grep -h LINUX_VERSION_CODE "$ctmp/kdir/include/generated/uapi/linux/version.h"
	# compat.h with them: its own errname and _printk on 5.10; the kernel's
	# errname, its own _printk on the copy.
	expect_out conftest-5.10-compat-errname 0 '' grep -q nvpm_carried_errname "$ctmp/stock/build/carried/compat.i"
	expect_out conftest-5.10-compat-printk 0 '' grep -qx 'int _printk(const char \*fmt, \.\.\.);' "$ctmp/stock/build/carried/compat.i"
	expect_out conftest-5.10-backported-compat-errname 1 '^0$' grep -c nvpm_carried_errname "$ctmp/backported/build/carried/compat.i"
	expect_out conftest-5.10-backported-compat-printk 0 '' grep -qx 'int _printk(const char \*fmt, \.\.\.);' "$ctmp/backported/build/carried/compat.i"
else
	echo "  SKIP kbuild/conftest-*: Debian 11's 5.10 is not provisioned (scripts/provision-carried.sh 5.10)"
fi
# A compiler that cannot run is said to be the fault, and nothing written.
expect_out conftest-no-compiler 1 "the compiler cannot build against this kernel's headers" \
	sh kbuild/carried/conftest.sh "$tmp/conftest.h" "$tmp/.conftest.h.d" /dev/null "$tmp/no-cc" -I"$norust/include"
expect_out conftest-no-compiler-nothing-written 1 '' test -e "$tmp/conftest.h"

finish
