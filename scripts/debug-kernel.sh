#!/usr/bin/env bash
# Debug guest kernel: KASAN, lockdep, kmemleak, fault injection, Rust, no
# symbol versions or debug information; scripts/debug.config on top of
# x86_64_defconfig + kvm_guest.config. Built with clang (LLVM=-19;
# KASAN with Rust needs a clang kernel) from the same linux-source-7.3 package
# as the release KDIR (kernel.env), in its own source copy and O= dir inside
# the trixie root, so the release KDIR is never touched. Cached by (source
# package version, fragment, toolchain versions): a second run is instant.
#
#   scripts/debug-kernel.sh [build]    build what is missing (the kernel, its headers tree);
#                                      write $NVPM_CACHE/debug-kernel.env
#   scripts/debug-kernel.sh cached     exit 0 if the current key is built; builds nothing
#   scripts/debug-kernel.sh run CMD... CMD in the trixie root (scripts/in-chroot.sh) with KREL,
#                                      KDIR, KMAKE_FLAGS, VMLINUZ, DEBIAN_MODULES and the guest
#                                      runner's GUEST_* settings naming the debug kernel
#
# Cold build: see tests/debug/README.md for the measured times.
# shellcheck disable=SC2153 # KREL, KROOT, BZIMAGE, ... come from the sourced env files
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck source=scripts/kernel-build.sh
. scripts/kernel-build.sh

# Bump when the recipe changes in a way the cache key cannot see.
RECIPE=1
FRAGMENT=scripts/debug.config
# Not KMAKE_FLAGS: kernel.env, sourced below, has the release kernel's.
DEBUG_KMAKE_FLAGS="ARCH=x86_64 LLVM=-19"
DEBUG_ENV=$NVPM_CACHE/debug-kernel.env
# Boot parameters the debug kernel wants: report every KASAN error, not just
# the first; 4-level paging (QEMU's -cpu max offers LA57; with 5-level paging
# some boots of this KASAN_VMALLOC kernel flood the log with KASAN
# wild-memory-access reports on the IRQ stack from the first interrupt on).
BOOT_APPEND="kasan_multi_shot no5lvl"

cmd=${1:-build}
[ $# = 0 ] || shift
case $cmd in
build | cached | run) ;;
*) die "usage: $0 [build | cached | run CMD...]" ;;
esac

# `run`: no root work of its own; scripts/in-chroot.sh does the mounting.
if [ "$cmd" = run ]; then
	[ $# -gt 0 ] || die "usage: $0 run CMD..."
	[ -r "$DEBUG_ENV" ] || die "no debug kernel yet: run make debug-kernel"
	# shellcheck source=/dev/null
	. "$DEBUG_ENV"
	[ -r "$BZIMAGE" ] || die "$BZIMAGE is missing: run make debug-kernel"
	exec scripts/in-chroot.sh env KREL="$KREL" KDIR="$KDIR_CHROOT" KMAKE_FLAGS="$KMAKE_FLAGS" \
		VMLINUZ="${BZIMAGE#"$CHROOT"}" DEBIAN_MODULES="${MODULES#"$CHROOT"}" \
		GUEST_OUT=build/guest-debug GUEST_TIMEOUT="${GUEST_TIMEOUT:-2400}" GUEST_KMEMLEAK=1 \
		GUEST_APPEND="$BOOT_APPEND${GUEST_APPEND:+ $GUEST_APPEND}" "$@"
fi

[ "$(id -u)" = 0 ] || die "the debug kernel build needs root (chroot, mount)"
[ -r "$NVPM_CACHE/kernel.env" ] || die "not provisioned yet: run make (or scripts/provision.sh)"
# shellcheck source=/dev/null
. "$NVPM_CACHE/kernel.env"
enter_private_namespace "$cmd" "$@"
# shellcheck disable=SC2119 # the repo is not needed in the root here
chroot_mount

in_chroot sh -c 'command -v clang-19 && command -v ld.lld-19' >/dev/null ||
	die "clang-19/lld-19 are not in the trixie root: run scripts/provision.sh (make does)"
tools=$(in_chroot sh -c 'rustc --version; bindgen --version; clang-19 --version | head -n1; ld.lld-19 --version')
key=$({ printf 'recipe %s\n%s\n%s\n' "$RECIPE" "$KPKGVER" "$tools"; cat "$FRAGMENT"; } | sha256sum | cut -c1-10)
DROOT=/kernels/debug-${KPKGVER%%-*}-$key # inside the root
DIR=$CHROOT$DROOT                         # the same, seen from the host
SRC=$DROOT/linux-source-7.3
OUT=$DROOT/build

if [ "$cmd" = cached ]; then
	if [ -e "$DIR/.complete" ]; then echo "debug kernel cached: $DIR"; exit 0; fi
	echo "debug kernel not built for this key ($DIR)"
	exit 1
fi

configure() {
	local kmake="make -C $SRC O=$OUT $DEBUG_KMAKE_FLAGS"
	log "configuring: x86_64_defconfig + kvm_guest.config + $FRAGMENT"
	mkdir -p "$CHROOT$OUT"
	cp "$FRAGMENT" "$DIR/debug.config"
	# shellcheck disable=SC2086 # kmake is a word list
	in_chroot sh -c "set -e; $kmake x86_64_defconfig kvm_guest.config
		$SRC/scripts/kconfig/merge_config.sh -m -O $OUT $OUT/.config $DROOT/debug.config
		$kmake olddefconfig" >"$DIR/config.log" 2>&1 || die "configuring failed, see $DIR/config.log"
	check_config "$FRAGMENT" "$CHROOT$OUT/.config"
}

# The headers a distribution ships for building modules against this kernel:
# what the kernel's own linux-headers .deb holds (its install-extmod-build),
# the .config (as Debian's and Ubuntu's headers have it) and the compiled
# Rust crates (as Ubuntu's linux-lib-rust adds them). The packaging suite
# installs them for DKMS. About 1 s per 10 MB; made once per build.
headers() {
	local dest=$DROOT/headers/linux-headers-$1
	[ -e "$DIR/headers/.complete" ] && return 0
	rm -rf "$DIR/headers"
	# shellcheck disable=SC2086 # DEBUG_KMAKE_FLAGS is a word list
	in_chroot sh -ec "cd $OUT
		make -s -C $SRC O=$OUT $DEBUG_KMAKE_FLAGS run-command KBUILD_RUN_COMMAND='$SRC/scripts/package/install-extmod-build $dest'
		cp .config $dest/.config
		mkdir -p $dest/rust && cp rust/*.rmeta rust/*.so $dest/rust/" >"$DIR/headers.log" 2>&1 ||
		die "making the headers tree failed, see $DIR/headers.log"
	touch "$DIR/headers/.complete"
	log "headers tree: $DIR/headers/linux-headers-$1 ($(du -sxh "$DIR/headers" | cut -f1))"
}

write_env() {
	local krel bzimage modules
	krel=$(cat "$CHROOT$OUT/include/config/kernel.release")
	bzimage=$CHROOT$OUT/arch/x86/boot/bzImage
	modules=$DIR/modules/lib/modules/$krel
	[ -r "$bzimage" ] || die "$bzimage is missing"
	find "$modules" -name 'ib_core.ko*' | grep -q . || die "no ib_core.ko under $modules"
	[ -s "$modules/modules.dep" ] || die "$modules/modules.dep is missing (depmod)"
	headers "$krel"
	cat >"$DEBUG_ENV.tmp" <<EOT
# Written by scripts/debug-kernel.sh: the debug guest kernel ($FRAGMENT).
KPKGVER="$KPKGVER"
KREL="$krel"
KDIR_CHROOT="$OUT"
KDIR_HOST="$CHROOT$OUT"
BZIMAGE="$bzimage"
MODULES="$modules"
HEADERS="$DIR/headers/linux-headers-$krel"
KMAKE_FLAGS="$DEBUG_KMAKE_FLAGS"
BOOT_APPEND="$BOOT_APPEND"
BUILD_SECONDS="$(cat "$DIR/.complete")"
CHROOT="$CHROOT"
EOT
	mv "$DEBUG_ENV.tmp" "$DEBUG_ENV"
}

ensure_built "debug kernel" "debug" "$DEBUG_KMAKE_FLAGS" all
write_env
log "wrote $DEBUG_ENV"
