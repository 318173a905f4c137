#!/usr/bin/env bash
# Provisions what `make` needs on a fresh machine, caching it outside the repo:
#   1. a Debian trixie root with the toolchain that built Debian's 7.x kernels;
#   2. the current trixie-backports kernel of a series, 7.3 unless KSERIES
#      names another (7.2): source, headers, binary, modules;
#   3. a Rust-capable KDIR prepared from it.
# Writes $NVPM_CACHE/kernel.env describing what it used (kernel-$KSERIES.env
# for a series other than 7.3, kernel-$KSERIES-$KARCH.env for another
# architecture). KERNEL_VERSION pins another package version of the series
# (e.g. 7.3.4-1~bpo13+1). KARCH names the Debian architecture of the kernel
# packages (amd64 by default; arm64 is cross-built here, booted under TCG).
set -euo pipefail
cd "$(dirname "$0")/.."
KSERIES=${KSERIES:-7.3}
case $KSERIES in 7.[0-9] | 7.[1-9][0-9]) ;; *) echo "provision: KSERIES=$KSERIES is not a 7.x series" >&2; exit 1 ;; esac
KARCH=${KARCH:-amd64}
# Debian's kernel flavour (arm64-16k is another arm64 one).
KFLAVOUR=${KFLAVOUR:-$KARCH}
# The GNU triple of Debian's architecture: the cross tools' prefix.
case $KARCH in
amd64) KTRIPLE=x86_64-linux-gnu ;;
arm64) KTRIPLE=aarch64-linux-gnu ;;
*) echo "provision: KARCH=$KARCH: expected amd64 or arm64" >&2; exit 1 ;;
esac
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

[ "$(id -u)" = 0 ] || die "provisioning needs root (debootstrap, chroot, mount)"
mkdir -p "$NVPM_CACHE"
enter_private_namespace "$@"
exec 9>"$NVPM_CACHE/.lock"
flock 9

ensure_chroot() {
	[ -e "$CHROOT/.complete" ] && return 0
	local t0=$SECONDS
	rm -rf "$CHROOT"
	debootstrap_trixie "$CHROOT" "$NVPM_CACHE/debootstrap.log" "debootstrap trixie into $CHROOT (about 1 minute)"
	touch "$CHROOT/.complete"
	log "chroot bootstrapped in $((SECONDS - t0)) s"
}

# Installs whatever of CHROOT_PACKAGES the root does not have yet, and for a
# foreign KARCH its cross compiler, QEMU and Rust's standard library for the
# guest tools (multiarch).
ensure_packages() {
	local missing p packages=$CHROOT_PACKAGES
	if [ "$KARCH" != amd64 ]; then
		in_chroot dpkg --print-foreign-architectures | grep -qx "$KARCH" || {
			log "adding $KARCH to the chroot's dpkg architectures"
			in_chroot dpkg --add-architecture "$KARCH"
			rm -f "$CHROOT/var/lib/apt/lists/.nvpm-updated"
		}
		packages="$packages $(cross_packages)"
	fi
	missing=$(for p in $packages; do
		in_chroot dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || echo "$p"
	done)
	[ -n "$missing" ] || return 0
	log "installing in the chroot: $(echo $missing)"
	in_chroot apt-get -o DPkg::Lock::Timeout=900 update -qq
	touch "$CHROOT/var/lib/apt/lists/.nvpm-updated"
	# shellcheck disable=SC2086 # word splitting of the package list is intended
	in_chroot apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends $missing \
		>"$NVPM_CACHE/apt.log" 2>&1 || die "apt-get install failed, see $NVPM_CACHE/apt.log"
}

# Picks the linux-source-$KSERIES version (newest in trixie-backports unless pinned)
# and derives the ABI name of the matching binary packages.
resolve_kernel() {
	local stamp=$CHROOT/var/lib/apt/lists/.nvpm-updated
	if [ -z "$(find "$stamp" -mmin -1440 2>/dev/null)" ]; then
		log "refreshing the chroot's package lists"
		if in_chroot apt-get -o DPkg::Lock::Timeout=900 update -qq; then touch "$stamp"; else
			log "warning: apt-get update failed; using the lists already there"
		fi
	fi
	if [ -n "${KERNEL_VERSION:-}" ]; then
		KPKGVER=$KERNEL_VERSION
	else
		KPKGVER=$(in_chroot apt-cache madison linux-source-$KSERIES | awk -F'|' '$3 ~ /backports/ {gsub(/ /,"",$2); print $2}' |
			sort -V | tail -n1)
	fi
	[ -n "$KPKGVER" ] || die "no linux-source-$KSERIES in trixie-backports"
	local upstream=${KPKGVER%%-*}
	KABI=$upstream+deb13
	KREL=$KABI-$KFLAVOUR
	in_chroot apt-cache madison "linux-headers-$KREL:$KARCH" | grep -qF "| $KPKGVER |" ||
		die "linux-headers-$KREL $KPKGVER not found next to linux-source-$KSERIES $KPKGVER"
	log "kernel: linux-source-$KSERIES $KPKGVER, release $KREL"
}

# Refuses a toolchain that differs from the one the kernel's config names.
check_toolchain() { # $1 = .config
	local want have
	want=$(config_text CONFIG_RUSTC_VERSION_TEXT "$1")
	have=$(in_chroot rustc --version)
	[ "$want" = "$have" ] || die "rustc mismatch: kernel built with '$want', chroot has '$have'"
	want=$(config_text CONFIG_BINDGEN_VERSION_TEXT "$1")
	have=$(in_chroot bindgen --version)
	[ "$want" = "$have" ] || die "bindgen mismatch: kernel built with '$want', chroot has '$have'"
	want=$(config_text CONFIG_CC_VERSION_TEXT "$1")
	have=$(in_chroot "$KTRIPLE-gcc-14" --version | head -n1)
	[ "$want" = "$have" ] || die "CC mismatch: kernel built with '$want', chroot has '$have'"
}

# The tree is keyed by what produced it: the kernel packages, the three
# tools (a changed tool makes a new tree, which check_toolchain then vets),
# and this recipe (the two functions' text).
ensure_kdir() {
	local key dir
	key=$({
		printf '%s\n' "$KPKGVER"
		in_chroot sh -c "rustc --version; bindgen --version; $KTRIPLE-gcc-14 --version | head -n1"
		declare -f ensure_kdir check_toolchain kmake_flags ensure_userland
	} | sha256sum | cut -c1-10)
	KROOT=/kernels/$KREL-$key
	dir=$CHROOT$KROOT
	if [ -e "$dir/.complete" ]; then return 0; fi
	local t0=$SECONDS
	rm -rf "$dir"
	mkdir -p "$dir/debs" "$dir/pkg"
	log "downloading Debian's $KREL packages"
	in_chroot sh -c "cd $KROOT/debs && apt-get download -qq -o APT::Sandbox::User=root linux-source-$KSERIES=$KPKGVER \
		linux-binary-$KREL:$KARCH=$KPKGVER linux-modules-$KREL:$KARCH=$KPKGVER linux-headers-$KREL:$KARCH=$KPKGVER \
		linux-headers-$KABI-common=$KPKGVER linux-kbuild-$KABI:$KARCH=$KPKGVER" ||
		die "apt-get download of the $KPKGVER kernel packages failed"
	local d
	for d in "$dir"/debs/*.deb; do dpkg-deb -x "$d" "$dir/pkg"; done
	log "unpacking linux-source-$KSERIES (about 15 s)"
	tar -xf "$dir"/pkg/usr/src/linux-source-$KSERIES.tar.* -C "$dir"
	rm -f "$dir"/pkg/usr/src/linux-source-$KSERIES.tar.*
	local hdr=$dir/pkg/usr/src/linux-headers-$KREL
	check_toolchain "$hdr/.config"
	cp "$hdr/.config" "$dir/linux-source-$KSERIES/.config"
	local kmake
	kmake="make -C $KROOT/linux-source-$KSERIES $(kmake_flags "$hdr")"
	in_chroot $kmake -s olddefconfig
	cmp -s "$hdr/.config" "$dir/linux-source-$KSERIES/.config" ||
		die "olddefconfig changed Debian's .config: the chroot's toolchain does not match $KREL"
	log "modules_prepare: building the kernel's Rust crates (2-3 minutes)"
	in_chroot $kmake -j"$(nproc)" modules_prepare 2>&1 | grep --line-buffered -v 'Failed to run rustfmt' |
		while IFS= read -r line; do printf '  [%4ds] %s\n' "$((SECONDS - t0))" "$line"; done
	[ "${PIPESTATUS[0]}" = 0 ] || die "modules_prepare failed"
	cp "$hdr/Module.symvers" "$hdr/vmlinux" "$dir/linux-source-$KSERIES/"
	[ "$KARCH" = amd64 ] || ensure_userland "$dir/userland"
	touch "$dir/.complete"
	log "KDIR ready in $((SECONDS - t0)) s"
}

write_env() {
	local dir=$CHROOT$KROOT
	local env=$NVPM_CACHE/kernel.env hdr=$dir/pkg/usr/src/linux-headers-$KREL
	[ "$KSERIES" = 7.3 ] || env=$NVPM_CACHE/kernel-$KSERIES.env
	[ "$KFLAVOUR" = amd64 ] || env=$NVPM_CACHE/kernel-$KSERIES-$KFLAVOUR.env
	cat >"$env.tmp" <<EOT
# Written by scripts/provision.sh: the kernel this build used.
KPKGVER="$KPKGVER"
KREL="$KREL"
KROOT="$KROOT"
KDIR_CHROOT="$KROOT/linux-source-$KSERIES"
KDIR_HOST="$dir/linux-source-$KSERIES"
VMLINUZ="$dir/pkg/usr/lib/modules/$KREL/vmlinuz"
DEBIAN_MODULES="$dir/pkg/usr/lib/modules/$KREL"
KMAKE_FLAGS="$(kmake_flags "$hdr")"
GUEST_USERLAND="$([ "$KARCH" = amd64 ] || echo "$dir/userland")"
CHROOT="$CHROOT"
EOT
	mv "$env.tmp" "$env"
}

ensure_chroot
chroot_mount
ensure_packages
resolve_kernel
ensure_kdir
write_env
