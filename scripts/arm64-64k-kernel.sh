#!/usr/bin/env bash
# 64 KiB-page arm64 guest kernel, the page size of Grace hosts (Ubuntu's
# linux-nvidia-64k, RHEL's kernel-64k), which Debian does not ship: Debian's
# arm64 7.3 configuration (the provisioned arm64 tree's .config) with
# scripts/arm64-64k.config on top (64 KiB pages, symbol versions as Ubuntu's
# linux-nvidia-64k has them), trimmed for the guest: only ib_core's modules
# (localmodconfig), no SoC platforms, none of the subsystems the guest does
# not use. Cross-built from the same linux-source-7.3 with the arm64 tree's
# toolchain (its KMAKE_FLAGS), in its own source copy and O= dir inside the
# trixie root. Cached by (source package version, Debian's config, fragment,
# toolchain, recipe): a second run is instant.
#
#   scripts/arm64-64k-kernel.sh [build]   build what is missing; write
#                                         $NVPM_CACHE/kernel-7.3-arm64-64k.env, which
#                                         NVPM_KERNEL_ENV names as for Debian's flavours
#   scripts/arm64-64k-kernel.sh cached    exit 0 if the current key is built; builds nothing
#
# Needs the arm64 tree (KARCH=arm64 scripts/provision.sh). Cold cost: see
# tests/arm64/README.md.
# shellcheck disable=SC2153 # KREL, KROOT, ... come from the sourced env files
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck source=scripts/kernel-build.sh
. scripts/kernel-build.sh

# Bump when the recipe changes in a way the cache key cannot see.
RECIPE=1
FRAGMENT=scripts/arm64-64k.config
FLAVOUR=arm64-64k
ENV_OUT=$NVPM_CACHE/kernel-7.3-$FLAVOUR.env
BASE_ENV=$NVPM_CACHE/kernel-7.3-arm64.env

cmd=${1:-build}
[ $# = 0 ] || shift
case $cmd in
build | cached) ;;
*) die "usage: $0 [build | cached]" ;;
esac

[ "$(id -u)" = 0 ] || die "the 64K kernel build needs root (chroot, mount)"
[ -r "$BASE_ENV" ] || die "no arm64 tree yet: run KARCH=arm64 scripts/provision.sh"
# shellcheck source=/dev/null
. "$BASE_ENV"
BASE_CONFIG=$KDIR_HOST/.config
BASE_USERLAND=$GUEST_USERLAND
# The arm64 tree's toolchain, without its release name (this kernel has its own).
KFLAGS=$(sed 's/ *KERNELRELEASE=[^ ]*//' <<<"$KMAKE_FLAGS")
enter_private_namespace "$cmd" "$@"
# shellcheck disable=SC2119 # the repo is not needed in the root here
chroot_mount

cc=$(sed -n 's/.*\bCC=\([^ ]*\).*/\1/p' <<<"$KFLAGS")
tools=$(in_chroot sh -c "rustc --version; bindgen --version; $cc --version | head -n1")
key=$({
	printf 'recipe %s\n%s\n%s\n' "$RECIPE" "$KPKGVER" "$tools"
	cat "$BASE_CONFIG" "$FRAGMENT"
} | sha256sum | cut -c1-10)
DROOT=/kernels/$FLAVOUR-${KPKGVER%%-*}-$key # inside the root
DIR=$CHROOT$DROOT                           # the same, seen from the host
SRC=$DROOT/linux-source-7.3
OUT=$DROOT/build

if [ "$cmd" = cached ]; then
	if [ -e "$DIR/.complete" ]; then echo "64K kernel cached: $DIR"; exit 0; fi
	echo "64K kernel not built for this key ($DIR)"
	exit 1
fi

# Debian's config, then: every module but ib_core's off (localmodconfig
# with ib_core as the only loaded module), every SoC platform of
# arch/arm64/Kconfig.platforms off (QEMU's virt board needs none), then the
# fragment. Each fragment line is checked against the result.
configure() {
	local kmake="make -C $SRC O=$OUT $KFLAGS"
	log "configuring: Debian's arm64 config, localmodconfig (ib_core), no platforms, $FRAGMENT"
	mkdir -p "$CHROOT$OUT"
	cp "$BASE_CONFIG" "$CHROOT$OUT/.config"
	printf 'Module                  Size  Used by\nib_core 1 0\n' >"$DIR/lsmod"
	sed -n 's/^config \(ARCH_[A-Z0-9_]*\)$/# CONFIG_\1 is not set/p' "$CHROOT$SRC/arch/arm64/Kconfig.platforms" >"$DIR/platforms.config"
	cp "$FRAGMENT" "$DIR/64k.config"
	# shellcheck disable=SC2086 # kmake is a word list
	in_chroot sh -c "set -e; yes '' | $kmake LSMOD=$DROOT/lsmod localmodconfig
		$SRC/scripts/kconfig/merge_config.sh -m -O $OUT $OUT/.config $DROOT/platforms.config $DROOT/64k.config
		$kmake olddefconfig" >"$DIR/config.log" 2>&1 || die "configuring failed, see $DIR/config.log"
	check_config "$FRAGMENT" "$CHROOT$OUT/.config"
	log "configured: $(grep -c '=m$' "$CHROOT$OUT/.config") modules, $(grep -c '=y$' "$CHROOT$OUT/.config") built-in options"
}

# In provision.sh's format, so that NVPM_KERNEL_ENV=kernel-7.3-arm64-64k.env
# builds against this tree (KDIR is the O= dir) and boots its Image.
write_env() {
	local krel image modules
	krel=$(cat "$CHROOT$OUT/include/config/kernel.release")
	image=$CHROOT$OUT/arch/arm64/boot/Image
	modules=$DIR/modules/lib/modules/$krel
	[ -r "$image" ] || die "$image is missing"
	find "$modules" -name 'ib_core.ko*' | grep -q . || die "no ib_core.ko under $modules"
	[ -s "$modules/modules.dep" ] || die "$modules/modules.dep is missing (depmod)"
	cat >"$ENV_OUT.tmp" <<EOT
# Written by scripts/arm64-64k-kernel.sh: the 64K-page arm64 kernel ($FRAGMENT).
KPKGVER="$KPKGVER"
KREL="$krel"
KROOT="$DROOT"
KDIR_CHROOT="$OUT"
KDIR_HOST="$CHROOT$OUT"
VMLINUZ="$image"
DEBIAN_MODULES="$modules"
KMAKE_FLAGS="$KFLAGS KERNELRELEASE=$krel"
GUEST_USERLAND="$BASE_USERLAND"
BUILD_SECONDS="$(cat "$DIR/.complete")"
CHROOT="$CHROOT"
EOT
	mv "$ENV_OUT.tmp" "$ENV_OUT"
}

ensure_built "64K kernel" "$FLAVOUR" "$KFLAGS" Image modules
write_env
log "wrote $ENV_OUT"
